// The libtorch version and device support compiled into this binary (build_info.h).
#include "train/build_info.h"

#include <torch/version.h>

#if defined(GPULAB_WITH_CUDA)
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace gpulab::train {

std::string libtorch_description() {
#if defined(GPULAB_WITH_CUDA)
  // The CUDA runtime libtorch was built with (13020: 13.2), and what this machine shows it:
  // device_count answers 0 without a driver, loading nothing that needs one.
  const long v = at::detail::getCUDAHooks().versionCUDART();
  const int gpus = c10::cuda::device_count();
  return "libtorch " TORCH_VERSION ", CUDA " + std::to_string(v / 1000) + "." +
         std::to_string(v % 1000 / 10) + "; " +
         (gpus == 0 ? std::string("no GPU visible")
                    : std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + " visible");
#else
  return "libtorch " TORCH_VERSION ", CPU only";
#endif
}

}  // namespace gpulab::train
