// Logits -> next token (see token_sampler.h); each step mirrors the transformers processor of
// the same name in its arithmetic, so the scores agree with theirs on the same logits.
#include "train/token_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace gpulab::train {

namespace {

constexpr float kExcluded = -std::numeric_limits<float>::infinity();

// RepetitionPenaltyLogitsProcessor: a seen token's logit is divided by the penalty when
// positive and multiplied by it when negative, so it always moves down for a penalty > 1. Ids
// outside the logits (padding, ids the head cannot produce) land on one extra column, dropped.
torch::Tensor penalize(const torch::Tensor& scores, const torch::Tensor& history, double penalty) {
  if (penalty == 1.0 || !history.defined() || history.size(1) == 0) return scores;
  const int64_t vocab = scores.size(1);
  auto ids = history.to(scores.device(), torch::kLong);
  ids = ids.masked_fill(ids.lt(0).logical_or(ids.gt(vocab)), vocab);
  const auto padded =
      torch::nn::functional::pad(scores, torch::nn::functional::PadFuncOptions({0, 1}));
  auto seen = padded.gather(1, ids);
  seen = torch::where(seen < 0, seen * penalty, seen / penalty);
  return padded.scatter(1, ids, seen).narrow(1, 0, vocab);
}

// TopKLogitsWarper: everything below the k-th largest score goes (ties with it stay).
torch::Tensor keep_top_k(const torch::Tensor& scores, int64_t k) {
  if (k <= 0 || k >= scores.size(-1)) return scores;
  const auto kth = std::get<0>(scores.topk(k)).narrow(-1, k - 1, 1);
  return scores.masked_fill(scores < kth, kExcluded);
}

// TopPLogitsWarper: in ascending order, the tokens whose cumulative probability stays within
// 1 - top_p go; the likeliest token always stays.
torch::Tensor keep_top_p(const torch::Tensor& scores, double top_p) {
  if (top_p >= 1.0) return scores;
  const auto [sorted, order] = scores.sort(-1, /*descending=*/false);
  auto drop = sorted.softmax(-1).cumsum(-1) <= (1.0 - top_p);
  drop.narrow(-1, drop.size(-1) - 1, 1).fill_(false);
  return scores.masked_fill(drop.scatter(1, order, drop), kExcluded);
}

}  // namespace

std::optional<Error> check_sampler_settings(const SamplerSettings& s) {
  if (!std::isfinite(s.temperature) || s.temperature < 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("--temperature {} must be 0 (greedy) or positive", s.temperature));
  if (s.top_k < 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("--top_k {} must be 0 (all tokens) or positive", s.top_k));
  if (!(s.top_p > 0 && s.top_p <= 1))
    return Error(Code::kInvalidArgument, fmt::format("--top_p {} must be in (0, 1]", s.top_p),
                 "1 turns nucleus sampling off; 0.9 or 0.95 are usual");
  if (!(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0))
    return Error(Code::kInvalidArgument,
                 fmt::format("--repetition_penalty {} must be positive", s.repetition_penalty),
                 "1 turns it off; 1.1 to 1.3 discourage repeats");
  return std::nullopt;
}

TokenSampler::TokenSampler(const SamplerSettings& settings, uint64_t seed)
    : settings_(settings), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  if (auto bad = check_sampler_settings(settings)) throw Exception(*bad);
}

torch::Tensor TokenSampler::scores(const torch::Tensor& logits,
                                   const torch::Tensor& history) const {
  GPULAB_ASSERT(logits.dim() == 2, "logits must be [rows, vocab]");
  auto s = penalize(logits.to(torch::kFloat), history, settings_.repetition_penalty);
  if (greedy()) return s;
  if (settings_.temperature != 1.0) s = s / settings_.temperature;
  return keep_top_p(keep_top_k(s, settings_.top_k), settings_.top_p);
}

torch::Tensor TokenSampler::next(const torch::Tensor& logits, const torch::Tensor& history,
                                 const torch::Tensor& finished, int64_t pad_id) {
  torch::Tensor tokens;
  if (greedy() && settings_.repetition_penalty == 1.0) {
    tokens = logits.argmax(-1).cpu();
  } else if (greedy()) {
    tokens = scores(logits, history).argmax(-1).cpu();
  } else {
    const auto probs = scores(logits, history).softmax(-1).cpu();
    tokens = torch::multinomial(probs, 1, /*replacement=*/false, generator_).squeeze(1);
  }
  if (finished.defined()) tokens = tokens.masked_fill(finished.cpu(), pad_id);
  return tokens;
}

void TokenSampler::mark_finished(torch::Tensor& finished, const torch::Tensor& tokens,
                                 int64_t eos_id) {
  if (eos_id >= 0) finished.logical_or_(tokens.cpu() == eos_id);
}

}  // namespace gpulab::train
