// Importance weights against the sampling policy (see grpo_importance.h).
#include "train/rl/grpo_importance.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/strings.h"

namespace gpulab::train::rl {

const std::vector<std::string>& importance_mode_names() {
  static const std::vector<std::string> names = {"off", "token_truncate", "token_mask",
                                                 "sequence_truncate", "sequence_mask"};
  return names;
}

Result<ImportanceMode> parse_importance_mode(std::string_view name) {
  const auto& names = importance_mode_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) return static_cast<ImportanceMode>(i);
  return Error(Code::kInvalidArgument, fmt::format("unknown importance sampling mode '{}'", name),
               "use " + join(names, ", "));
}

std::string_view importance_mode_name(ImportanceMode mode) {
  return importance_mode_names().at(static_cast<size_t>(mode));
}

Status check_importance_sampling(const ImportanceSampling& is) {
  if (!(std::isfinite(is.min) && is.min >= 0))
    return Error(
        Code::kInvalidArgument,
        fmt::format("the importance sampling lower bound {} is not a finite number >= 0", is.min),
        "pass 0 for no lower bound");
  if (!(std::isfinite(is.max) && is.max > is.min))
    return Error(Code::kInvalidArgument,
                 fmt::format("the importance sampling upper bound {} is not above the lower "
                             "bound {}",
                             is.max, is.min),
                 "TRL's default upper bound is 3");
  return ok_status();
}

ImportanceWeights importance_weights(const torch::Tensor& old, const torch::Tensor& sampling,
                                     const torch::Tensor& mask, const ImportanceSampling& is) {
  if (is.mode == ImportanceMode::kOff || !old.defined() || !sampling.defined() ||
      old.sizes() != sampling.sizes() || mask.sizes() != old.sizes())
    throw Exception(Code::kInvalidArgument,
                    "importance_weights needs a mode and old, sampling and mask of one shape");
  torch::NoGradGuard no_grad;
  const auto m = mask.to(old.scalar_type());
  auto diff = torch::nan_to_num((old.detach() - sampling.to(old.scalar_type())) * m, 0.0);
  const bool per_sequence =
      is.mode == ImportanceMode::kSequenceTruncate || is.mode == ImportanceMode::kSequenceMask;
  if (per_sequence) diff = diff.sum(-1, /*keepdim=*/true);
  const auto raw = torch::exp(diff);
  const bool truncate =
      is.mode == ImportanceMode::kTokenTruncate || is.mode == ImportanceMode::kSequenceTruncate;
  const auto outside = (raw < is.min) | (raw > is.max);
  ImportanceWeights out;
  out.weights = truncate ? torch::clamp(raw, is.min, is.max) : raw.masked_fill(outside, 0.0);
  // Over completion tokens per token; over every row per sequence (as TRL's figures).
  const auto counted = per_sequence ? torch::ones_like(out.weights) : m;
  const auto n = counted.sum().clamp_min(1.0);
  out.mean = (out.weights * counted).sum() / n;
  out.capped = (outside.to(m.scalar_type()) * counted).sum() / n;
  return out;
}

}  // namespace gpulab::train::rl
