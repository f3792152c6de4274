// Whether gpulab's AVX2 kernels can run here: their tests skip, with the reason, where not.
#pragma once

#include "train/ops/avx2_lanes.h"

inline bool avx2_kernels_here() {
#if defined(GPULAB_AVX2_LANES)
  return gpulab::train::has_avx2_fma();
#else
  return false;
#endif
}
