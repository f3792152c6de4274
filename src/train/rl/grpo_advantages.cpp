// Group-relative advantages (see grpo_advantages.h).
#include "train/rl/grpo_advantages.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gpulab::train::rl {

torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size,
                               bool scale_by_std) {
  if (group_size < 2 || rewards.dim() != 1 || !rewards.is_floating_point() ||
      rewards.size(0) % group_size != 0)
    throw Exception(Code::kInvalidArgument,
                    fmt::format("group advantages need whole groups of at least 2 floating-point "
                                "rewards; got {} rewards in groups of {}",
                                rewards.numel(), group_size));
  const auto grouped = rewards.view({-1, group_size});
  const auto mean = grouped.mean(1, /*keepdim=*/true);
  auto advantages = grouped - mean;
  if (scale_by_std) advantages = advantages / (grouped.std(1, /*unbiased=*/true, true) + 1e-4);
  return advantages.reshape({-1});
}

}  // namespace gpulab::train::rl
