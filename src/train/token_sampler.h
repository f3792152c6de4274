// The next token from a model's logits, chosen as Hugging Face's generate() chooses it: the
// repetition penalty, then temperature, top-k and top-p (transformers' processor order), then a
// draw from the softmax with the sampler's own generator, or the argmax at temperature 0.
// Batched (one row per sequence, a finished flag per row), so `gpulab generate` and GRPO's
// rollouts draw their tokens through this one class.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "core/error.h"

namespace gpulab::train {

struct SamplerSettings {
  double temperature = 0.8;  // <= 0: greedy (the argmax, no draw)
  int64_t top_k = 40;        // 0: the whole vocabulary
  double top_p = 1.0;        // nucleus: the likeliest tokens whose mass reaches top_p; 1: off
  double repetition_penalty = 1.0;  // > 1 discourages tokens already in the row; 1: off
};

// kInvalidArgument naming the flag when a setting is outside its range.
std::optional<Error> check_sampler_settings(const SamplerSettings& s);

class TokenSampler {
 public:
  // Throws gpulab::Exception (kInvalidArgument) on settings check_sampler_settings refuses.
  TokenSampler(const SamplerSettings& settings, uint64_t seed);

  // The scores tokens are drawn from: logits [rows, vocab] as float32 after the penalty (over
  // history [rows, T], the ids each row has seen: prompt and generated; undefined for none),
  // the temperature, top-k and top-p, in that order. Excluded tokens are -inf. These equal
  // transformers' RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper
  // and TopPLogitsWarper applied in turn (tests/train/token_sampler_test.cpp).
  torch::Tensor scores(const torch::Tensor& logits, const torch::Tensor& history) const;

  // The next token of each row, [rows] int64 on the CPU. Rows whose `finished` flag (bool
  // [rows]; undefined: none) is set get pad_id. Greedy without a penalty takes the argmax of the
  // logits in their own precision (a float32 copy of float64 logits could tie two of them).
  torch::Tensor next(const torch::Tensor& logits, const torch::Tensor& history,
                     const torch::Tensor& finished = {}, int64_t pad_id = 0);

  // Sets `finished` where `tokens` is eos_id (nothing when eos_id < 0).
  static void mark_finished(torch::Tensor& finished, const torch::Tensor& tokens, int64_t eos_id);

  const SamplerSettings& settings() const { return settings_; }
  bool greedy() const { return settings_.temperature <= 0; }

 private:
  SamplerSettings settings_;
  at::Generator generator_;
};

}  // namespace gpulab::train
