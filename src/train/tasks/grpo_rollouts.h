// GRPO's rollouts: a group of sampled completions per prompt, and the tensors the policy's
// forward and the loss take from them (prompt + completion per row, right-padded; the positions
// whose logits predict each completion token; the completion mask).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "train/generate.h"
#include "train/models/causal_lm.h"

namespace gpulab::train {

// The completions of one step: `group` rows for each prompt, row p * group + g, each its new
// tokens (EOS included where chosen), and their log-probabilities when opts records them. The
// one place a step generates: generate_groups (train/rollout.h) batches every prompt's group at
// once.
struct StepRollouts {
  std::vector<std::vector<int64_t>> completions;
  std::vector<std::vector<double>> log_probs;  // empty unless opts.record_log_probs
};
StepRollouts rollouts_for_step(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                               int64_t group, const SamplingOptions& opts, TokenSampler& sampler);

// Several training ranks' shares of a step in one batch (a generation rank serving them): share s
// is prompts[s], drawn through samplers[s] (the stream that rank draws from colocated); returns
// each share's rollouts in order.
std::vector<StepRollouts> rollouts_for_shares(
    CausalLm& model, const std::vector<std::vector<std::vector<int64_t>>>& prompts, int64_t group,
    const SamplingOptions& opts, std::vector<TokenSampler>& samplers);

// Rollout steps in an epoch: every one of `world` training ranks takes `per_rank` prompts a step.
int64_t grpo_steps_per_epoch(int64_t prompt_count, int64_t per_rank, int world);

// Which prompts (indices into the prompt file) training rank `rank` of `world` takes at `step`:
// the epoch's shuffled order (seeded by `seed` and the epoch, the same on every rank), this
// rank's consecutive share of the step's window. The one home of the split: a colocated rank
// and a generation rank serving it (train/tasks/grpo_generation_rank.h) pick the same prompts.
std::vector<int64_t> grpo_step_prompts(int64_t prompt_count, int64_t seed, int64_t steps_per_epoch,
                                       int64_t step, int rank, int world, int64_t per_rank);

// The seed of training rank `rank`'s sampler at `step`: each rank and step its own stream, so a
// resumed run, and a generation rank sampling for that rank, draw what the colocated rank would.
uint64_t grpo_sampler_seed(int64_t seed, int64_t step, int rank, int world);

struct RolloutTensors {
  torch::Tensor inputs;     // [N, T] int64: prompt then completion, right-padded with pad_id
  torch::Tensor tokens;     // [N, C] int64: the completion tokens, padded with 0
  torch::Tensor positions;  // [N, C] int64: the input position whose logits predict each
  torch::Tensor mask;       // [N, C] float: 1 on completion tokens
  torch::Tensor sampling_log_probs;  // [N, C] float64 as the sampler recorded them (0 on padding);
                                     // undefined when none were recorded
  int64_t sequence_tokens = 0;       // prompt + completion tokens of all rows (unpadded)
};

// The rows `rows` (indices into completions; prompt of row r: prompts[r / group]), on the CPU.
// Padding sits after each row's last token, so causal attention never lets a real token see it.
RolloutTensors rollout_tensors(const std::vector<std::vector<int64_t>>& prompts,
                               const StepRollouts& rollouts, const std::vector<int64_t>& rows,
                               int64_t group, int64_t pad_id);

// The logits [N, C, V] that predict the completion tokens: outputs [N, T, V] at `positions`.
torch::Tensor completion_logits(const torch::Tensor& outputs, const torch::Tensor& positions);

}  // namespace gpulab::train
