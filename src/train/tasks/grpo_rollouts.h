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
// tokens (EOS included where chosen). The one place a step generates: generate_groups
// (train/rollout.h) batches every prompt's group at once.
std::vector<std::vector<int64_t>> rollouts_for_step(
    CausalLm& model, const std::vector<std::vector<int64_t>>& prompts, int64_t group,
    const SamplingOptions& opts, TokenSampler& sampler);

struct RolloutTensors {
  torch::Tensor inputs;         // [N, T] int64: prompt then completion, right-padded with pad_id
  torch::Tensor tokens;         // [N, C] int64: the completion tokens, padded with 0
  torch::Tensor positions;      // [N, C] int64: the input position whose logits predict each
  torch::Tensor mask;           // [N, C] float: 1 on completion tokens
  int64_t sequence_tokens = 0;  // prompt + completion tokens of all rows (unpadded)
};

// The rows `rows` (indices into completions; prompt of row r: prompts[r / group]), on the CPU.
// Padding sits after each row's last token, so causal attention never lets a real token see it.
RolloutTensors rollout_tensors(const std::vector<std::vector<int64_t>>& prompts,
                               const std::vector<std::vector<int64_t>>& completions,
                               const std::vector<int64_t>& rows, int64_t group, int64_t pad_id);

// The logits [N, C, V] that predict the completion tokens: outputs [N, T, V] at `positions`.
torch::Tensor completion_logits(const torch::Tensor& outputs, const torch::Tensor& positions);

}  // namespace gpulab::train
