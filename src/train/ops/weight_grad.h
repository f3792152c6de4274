// A linear layer's weight gradient, dW = dY^T X over the batch's rows, in gpulab's AVX-512
// kernels: float32 operands, and bfloat16 operands with a float32 result. Why: libtorch's CPU
// product for it is MKL's sgemm, which took 981 ms of a float32 llama-125m step on a 2-core Zen 4
// where this kernel takes 848, and in bf16 oneDNN's product returns a bf16 gradient that the
// float32 weight then has to widen (26 ms alone for a 32,000 x 768 output layer over 1,024 rows)
// (bench/weight_grad_grid.cpp; docs/benchmarks.md, 2026-12-06).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether weight_grad takes dY [rows, out] and X [rows, in]: both 2-D on the CPU with equal rows,
// both float32 (a CPU with AVX-512 F, BW, VL, DQ) or both bf16 (those and BF16), gpulab's CPU
// kernels on.
bool weight_grad_applies(const torch::Tensor& dy, const torch::Tensor& x);

// dY^T X as float32 [out, in], the products summed in float32 (bf16 products are exact there).
// Reads dY and X in any strides (a copy makes them row-major first where they are not).
torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x);

}  // namespace gpulab::train
