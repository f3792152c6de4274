// The key libtorch's optimizers file a parameter's state under: one home for every caller (the
// one-pass optimizers, sharded checkpoints).
#pragma once

#include <torch/optim/optimizer.h>

#include <type_traits>
#include <utility>

namespace gpulab::train {

// The parameter's TensorImpl address (void* in libtorch 2.x).
using StateKey =
    typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

inline StateKey state_key(const at::Tensor& p) {
  return static_cast<StateKey>(p.unsafeGetTensorImpl());
}

}  // namespace gpulab::train
