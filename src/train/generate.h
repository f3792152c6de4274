// Text generation with a trained decoder: the prompt in one forward pass, then one token at a
// time through the KV cache, each chosen by a TokenSampler (train/token_sampler.h). Rows are
// continued together (several samples of one prompt, a GRPO group), each stopping at EOS or when
// its caller says so (a stop string).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/models/causal_lm.h"
#include "train/token_sampler.h"

namespace gpulab::train {

struct SamplingOptions : SamplerSettings {
  int64_t max_new_tokens = 64;
  uint64_t seed = 0;
  int64_t eos_id = -1;  // a row that chooses it is finished (kept as its last token); -1: none
  // generate_groups also records each chosen token's log-probability (train/token_log_probs.h):
  // what GRPO's importance sampling weighs the sampling policy by.
  bool record_log_probs = false;
};

// Sees each row's new token as it is chosen; returning false finishes that row.
using OnRowToken = std::function<bool(int64_t row, int64_t token)>;

// Refuses (gpulab::Exception, invalid input) a prompt that is empty, that with max_new_tokens
// exceeds the model's positions, or that holds a token outside its vocabulary; the message
// begins with `which` ("the prompt", "prompt 3").
void check_generation_prompt(const DecoderConfig& c, const std::vector<int64_t>& prompt,
                             const SamplingOptions& opts, const std::string& which);

// Continues `prompt` in `rows` rows at once, drawing through `sampler` (whose settings apply;
// opts' are not read again). Returns each row's new tokens, EOS included where a row chose it.
// Throws gpulab::Exception (invalid input) when prompt + new tokens exceed the model's positions
// or a prompt token is outside its vocabulary.
std::vector<std::vector<int64_t>> generate_rows(CausalLm& model, const std::vector<int64_t>& prompt,
                                                int64_t rows, const SamplingOptions& opts,
                                                TokenSampler& sampler,
                                                const OnRowToken& on_token = {});

// One row with a sampler of its own (seeded with opts.seed); on_token (optional) sees each new
// token as it is chosen.
std::vector<int64_t> generate(CausalLm& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& opts,
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace gpulab::train
