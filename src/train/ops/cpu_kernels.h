// One switch for gpulab's own CPU kernels (fused RMSNorm, SwiGLU, attention, float32 products,
// convolutions that are products): on by default, off for A/B timings against the libtorch 2.x ops
// a GPU host runs (`--cpu_kernels off`, bench/compare's kernel rows).
#pragma once

namespace gpulab::train {

void set_cpu_kernels(bool on);
bool cpu_kernels_enabled();

}  // namespace gpulab::train
