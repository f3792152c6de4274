// Matrix products under bfloat16 autocast on a CPU without bfloat16 GEMM kernels: bf16 operands
// multiplied by the fp32 GEMM, results rounded to bf16 (the arithmetic of a bf16 GEMM with fp32
// accumulation), instead of libtorch 1.13's scalar bf16 loop there (~15x slower than fp32).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// True where libtorch's CPU bf16 products take the scalar loop: x86 without the AVX-512 subsets
// (bw, vl, dq) its oneDNN bf16 path needs, or a libtorch built without oneDNN.
bool cpu_bf16_gemm_is_slow();

// x @ w^T (a bias-free linear layer) and a @ b (equal batch dimensions): under CPU bf16 autocast
// on such a CPU, through the fp32 GEMM with the same rounding points as autocast (operands,
// results and gradients in bf16; saved tensors in bf16); otherwise the ordinary ops (for x @ w^T:
// a decode step's own products, else dense_linear of onednn_linear.h).
torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& w);
torch::Tensor matrix_product(const torch::Tensor& a, const torch::Tensor& b);

// The fp32-GEMM products themselves, whatever the CPU (the two above pick them): operands are
// rounded to bf16 (and must then hold float or bf16 values), results and gradients are bf16.
torch::Tensor bf16_linear_on_fp32_gemm(const torch::Tensor& x, const torch::Tensor& w);
torch::Tensor bf16_matmul_on_fp32_gemm(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace gpulab::train
