// The autograd plumbing that both owners of gradients (GradReducer for DDP, ShardedModel for
// ZeRO) need: a call as each parameter's gradient is written, and one call once the whole
// backward pass is over.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "train/dist/compat.h"

namespace gpulab::train::dist {

// Calls ready(k) after AccumulateGrad has written params[k]'s gradient. The returned
// accumulators keep the hooks alive: hold them as long as the calls are wanted. `ready` should
// hold its owner weakly, so that a hook left on a model whose owner is gone does nothing.
std::vector<GradAccumulatorPtr> on_each_grad_ready(const std::vector<torch::Tensor>& params,
                                                   std::function<void(std::size_t)> ready);

// Runs fn once the current backward pass is done, on the thread that ran it.
void at_backward_end(std::function<void()> fn);

}  // namespace gpulab::train::dist
