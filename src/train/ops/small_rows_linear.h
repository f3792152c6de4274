// x @ w^T for a few rows of x in float32 on the CPU, outside autograd: a decode step's product (the
// live rows of a batch, one token each). The BLAS's small-M path copies the whole weight into its
// panels on every call, so a decode step reads each weight about three times from memory, and
// memory is what a decode step waits on; here each weight row is read once and multiplied with
// every row of x while it is in cache. Training products (grad on, many rows) keep the BLAS.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// The rows at most this kernel takes: above it the BLAS's blocking reads each weight once too.
inline constexpr int64_t kSmallRows = 64;
// Above kFewRows rows, a weight below kLargeWeight elements stays with the BLAS, which is as fast
// or faster there (bench/small_rows_grid.cpp's grid, docs/benchmarks.md 2026-12-04: at 16-64 rows
// weights of 2.4 M elements ran 0.76-1.78x, the 8.2 M and 24.6 M heads 1.60-2.48x).
inline constexpr int64_t kFewRows = 8;
inline constexpr int64_t kLargeWeight = int64_t{1} << 22;

// What every decode-step product of gpulab's own needs (small_rows_linear, packed_linear.h's):
// float32 CPU tensors, w 2-D, x at least 1-D, no gradient wanted, no autocast, AVX2 + FMA,
// gpulab's CPU kernels on.
bool cpu_fp32_inference_product(const torch::Tensor& x, const torch::Tensor& w);

// Whether small_rows_linear takes the product: float32 CPU tensors, w [N, K] contiguous, x [..., K]
// of at most kFewRows rows (kSmallRows for a weight of kLargeWeight elements or more), no gradient
// wanted, no autocast, AVX2 + FMA, gpulab's CPU kernels on.
bool small_rows_linear_applies(const torch::Tensor& x, const torch::Tensor& w);

// x @ w^T, shaped [..., N]; sums in another order than the BLAS (float32 rounding differs).
torch::Tensor small_rows_linear(const torch::Tensor& x, const torch::Tensor& w);

}  // namespace gpulab::train
