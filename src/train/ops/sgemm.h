// Row-major fp32 matrix products on raw memory through oneDNN's sgemm, where the build has
// oneDNN: the one GEMM entry of gpulab's own CPU kernels (conv_gemm, linear).
#pragma once

#include <cstdint>

namespace gpulab::train {

// True in builds with oneDNN (GPULAB_HAVE_DNNL); sgemm must not be called otherwise.
bool have_sgemm();

// C = op(A) op(B) (+ C when accumulate), op = transpose for 'T'. It runs on the calling thread's
// OpenMP thread count (libtorch's intra-op threads). A oneDNN failure throws (c10::Error): it is
// a bug in the shapes the caller computed, never user input.
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace gpulab::train
