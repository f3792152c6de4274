// Whether gpulab's AVX2 kernels (and its AVX-512 float32 linear) can run here: their tests skip,
// with the reason, where not.
#pragma once

#include "train/ops/avx2_lanes.h"

inline bool avx2_kernels_here() {
#if defined(GPULAB_AVX2_LANES)
  return gpulab::train::has_avx2_fma();
#else
  return false;
#endif
}

// Whether onednn_linear can be taken here (AVX-512 f, bw, vl, dq).
inline bool avx512_here() {
#if defined(GPULAB_AVX2_LANES)
  return gpulab::train::has_avx512_core();
#else
  return false;
#endif
}

// Whether weight_grad takes bf16 here (those and AVX-512 BF16).
inline bool avx512_bf16_here() {
#if defined(GPULAB_AVX2_LANES)
  return gpulab::train::has_avx512_bf16();
#else
  return false;
#endif
}
