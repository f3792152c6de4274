// What the trainer was built against, for `gpulab --version` and error messages; no libtorch
// header here, so the entry point can ask without compiling libtorch's headers.
#pragma once

#include <string>

namespace gpulab::train {

// "libtorch 2.15.0, CUDA 13.2; no GPU visible" or "libtorch 2.15.0, CPU only" (CUDA: a CUDA or
// ROCm build, whose devices libtorch names cuda:N).
std::string libtorch_description();

}  // namespace gpulab::train
