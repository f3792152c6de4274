// The key libtorch's optimizers file a parameter's state under: one home for every caller (the
// one-pass optimizers, sharded checkpoints), whichever libtorch the build has.
#pragma once

#include <torch/optim/optimizer.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace gpulab::train {

// std::string in libtorch 1.x, void* in 2.x.
using StateKey =
    typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

// The parameter's TensorImpl address: as a string in 1.x (what c10::guts::to_string printed)
// and as the pointer itself in 2.x.
// (A template so that the branch of the other libtorch is discarded, not compiled.)
template <typename Key = StateKey>
Key state_key(const at::Tensor& p) {
  c10::TensorImpl* impl = p.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << static_cast<const void*>(impl);
    return os.str();
  } else {
    return static_cast<Key>(impl);
  }
}

}  // namespace gpulab::train
