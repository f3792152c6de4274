// GRPO's group-relative advantages: each completion's reward less its group's mean, divided by
// the group's standard deviation (DeepSeekMath) or not (Dr. GRPO). As TRL's GRPOTrainer computes
// them: the sample standard deviation (Bessel's n - 1) plus 1e-4, so a group whose rewards are all
// equal gets advantage 0 rather than 0/0.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gpulab::train::rl {

// rewards [N] holds N / group_size groups of consecutive completions; returns [N] in its dtype.
// Throws gpulab::Exception (kInvalidArgument) for a group size below 2, N not a multiple of it,
// or rewards that are not floating point.
torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, bool scale_by_std);

}  // namespace gpulab::train::rl
