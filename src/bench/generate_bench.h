// Generation throughput of a decoder (`gpulab bench generate`): one prompt, greedy decoding
// through the KV cache, timed after warm-up runs; bench/compare runs transformers' `generate` on
// the same weights, prompt and lengths beside it (bench/reference/generate_ref.py). Rollout mode
// (prompt_lengths): GRPO's batch, prompts of several lengths x a group of rows each, through
// generate_groups and through generate_rows once per prompt. --profile records the timed runs with
// libtorch's profiler, so where a decode step's time goes shows op by op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/models/causal_lm.h"

namespace gpulab::bench {

struct GenerateBenchOptions {
  int64_t prompt_tokens = 32;
  int64_t new_tokens = 128;
  int64_t warmup = 1;
  int64_t reps = 3;
  std::vector<int64_t> prompt_lengths;  // rollout mode: one prompt of each length
  int64_t group = 1;                    // rollout mode: rows per prompt
  std::string profile;  // a Chrome trace of the timed runs (generate_groups' in rollout mode)
};

struct GenerateBenchResult {
  double tokens_per_second = 0;  // new tokens over the median run's wall time
  double seconds = 0;            // the median run's wall time (prompt + every new token)
  std::vector<int64_t> prompt;   // the prompt it decoded, the same ids generate_ref.py uses
  std::vector<int64_t> tokens;   // the new tokens: greedy runs must agree with the reference
  Json profile_top;              // with a profile: summarize_trace's rows
};

// The prompt both sides decode: deterministic ids spread over the vocabulary.
std::vector<int64_t> bench_prompt(int64_t length, int64_t vocab_size);

GenerateBenchResult run_generate_bench(train::CausalLm& model, const GenerateBenchOptions& o);

struct RolloutBenchResult {
  double tokens_per_second = 0, seconds = 0;  // generate_groups: every row's new tokens / median
  double per_prompt_tokens_per_second = 0, per_prompt_seconds = 0;  // generate_rows per prompt
  std::vector<std::vector<int64_t>> prompts;                        // the prompts both sides decode
  std::vector<std::vector<int64_t>> tokens;  // generate_groups' rows, row p * group + g
  bool same_tokens = false;                  // generate_rows chose the same greedy tokens
  Json profile_top;                          // with a profile: summarize_trace's rows
};

// Prompt i of length n: bench_prompt's ids, shifted by i, so prompts differ.
std::vector<std::vector<int64_t>> bench_prompts(const std::vector<int64_t>& lengths,
                                                int64_t vocab_size);

RolloutBenchResult run_rollout_bench(train::CausalLm& model, const GenerateBenchOptions& o);

}  // namespace gpulab::bench
