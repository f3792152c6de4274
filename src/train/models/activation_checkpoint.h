// Activation checkpointing for libtorch C++, which has no torch.utils.checkpoint: a custom
// autograd function runs a block without keeping its graph, and recomputes it in the backward
// pass to get the gradients of its input and of the parameters it uses.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace gpulab::train {

// y = fn(x), keeping only x. `params` are the tensors fn reads that need gradients (the block's
// parameters): their gradients flow through this node like any other, so accumulation hooks
// (DDP buckets) fire as usual. fn must be deterministic (no dropout).
torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&)>& fn,
                           const torch::Tensor& x, const std::vector<torch::Tensor>& params);

}  // namespace gpulab::train
