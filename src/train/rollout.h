// GRPO's rollouts: every prompt of a step continued in `group` rows, all in one batch through the
// KV cache. Prompts of different lengths are left-padded, with a padding mask and per-row
// positions, so each row computes what it would alone; each prompt's prefix runs once and its
// keys and values are copied to its group's rows; finished rows leave the batch. Segments of the
// batch may draw from samplers of their own (one per training rank a generation rank serves).
#pragma once

#include <cstdint>
#include <vector>

#include "train/generate.h"
#include "train/models/causal_lm.h"
#include "train/token_sampler.h"

namespace gpulab::train {

struct RolloutBatch {
  // prompts.size() * group rows; row p * group + g is prompt p's g-th completion, its EOS
  // included where the row chose it.
  std::vector<std::vector<int64_t>> completions;
  // With opts.record_log_probs: each completion token's log-probability under the logits it was
  // drawn from, at the sampler's temperature (token_log_probs), row by row as completions.
  std::vector<std::vector<double>> log_probs;
  int64_t generated_tokens = 0;  // the completions' tokens, all rows together
  double seconds = 0;            // wall time, prefill to the last token
};

// Continues each prompt in `group` rows, drawing through `sampler` (whose settings apply; opts
// gives max_new_tokens and eos_id). on_token (optional) sees each row's new token as it is chosen
// (row p * group + g); returning false finishes that row. Throws gpulab::Exception (invalid
// input) naming the prompt, before any forward pass, when a prompt is empty, holds a token
// outside the vocabulary or with max_new_tokens exceeds the model's positions; and when there
// are no prompts or group < 1.
RolloutBatch generate_groups(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                             int64_t group, const SamplingOptions& opts, TokenSampler& sampler,
                             const OnRowToken& on_token = {});

// Several callers' prompts in one batch (a GRPO generation rank serving several training ranks):
// segment s holds the next `prompts` prompts, all their rows, and draws through its own sampler,
// so each segment's tokens come from the stream it would draw from in a batch of its own. The
// samplers' settings must be equal. Throws as above, and (invalid input) when the segments do not
// cover the prompts or a segment is empty.
struct PromptSegment {
  int64_t prompts = 0;
  TokenSampler* sampler = nullptr;
};
RolloutBatch generate_groups(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                             int64_t group, const SamplingOptions& opts,
                             const std::vector<PromptSegment>& segments,
                             const OnRowToken& on_token = {});

}  // namespace gpulab::train
