// The libtorch version and device support compiled into this binary (build_info.h).
#include "train/build_info.h"

#include <torch/version.h>

namespace gpulab::train {

std::string libtorch_description() {
#if defined(GPULAB_WITH_CUDA)
  return "libtorch " TORCH_VERSION ", CUDA";
#else
  return "libtorch " TORCH_VERSION ", CPU only";
#endif
}

}  // namespace gpulab::train
