// The key libtorch's optimizers file a parameter's state under, shared by the one-pass optimizers.
#pragma once

#include <c10/core/TensorImpl.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace gpulab::train {

// The TensorImpl address: as a string in libtorch 1.x (what c10::guts::to_string prints) and as
// the pointer itself in 2.x.
template <typename Key>
Key state_key(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << static_cast<const void*>(impl);
    return os.str();
  } else {
    return static_cast<Key>(impl);
  }
}

}  // namespace gpulab::train
