// Chosen tokens' log-probabilities (see token_log_probs.h).
#include "train/token_log_probs.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace gpulab::train {

namespace {
void require(bool ok, const std::string& what) {
  if (!ok) throw Exception(Code::kInvalidArgument, "token_log_probs: " + what);
}
}  // namespace

torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens,
                              double temperature) {
  require(logits.dim() == 3 && tokens.dim() == 2 && logits.size(0) == tokens.size(0) &&
              logits.size(1) == tokens.size(1),
          "needs logits [N, T, V] and tokens [N, T]");
  require(temperature > 0 && std::isfinite(temperature), "the temperature must be positive");
  require(tokens.numel() == 0 ||
              (tokens.min().item<int64_t>() >= 0 && tokens.max().item<int64_t>() < logits.size(2)),
          "a completion token is outside the vocabulary of the logits");
  const auto scaled = temperature == 1.0 ? logits : logits / temperature;
  const auto picked = scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
  return picked - torch::logsumexp(scaled, -1);
}

}  // namespace gpulab::train
