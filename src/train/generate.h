// Text generation with a trained decoder: the prompt in one forward pass, then one token at a
// time through the KV cache, sampled with temperature and top-k (greedy at temperature 0).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "train/models/causal_lm.h"

namespace gpulab::train {

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0.8;  // <= 0: greedy
  int64_t top_k = 40;        // 0: the whole vocabulary
  uint64_t seed = 0;
};

// Returns the new tokens; on_token (optional) sees each as it is chosen. Throws
// gpulab::Exception (invalid input) when prompt + new tokens exceed the model's positions.
std::vector<int64_t> generate(CausalLm& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& opts,
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace gpulab::train
