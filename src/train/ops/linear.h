// A bias-free linear layer (x @ w^T) in fp32 on the CPU through oneDNN's sgemm, whatever BLAS
// libtorch links: on a Llama block's shapes it was 2-5 % faster than OpenBLAS on an AVX2 EPYC, and
// a llama-125m fp32 step took a third of the time on an AVX-512 Xeon (docs/benchmarks.md, session
// 11); its weight gradient is written in the weight's own layout (no transposed copy, no
// separate zeroing pass).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether fp32_linear serves these operands: fp32 CPU tensors, w 2-D, x with w's input size
// last, CPU autocast off, in a build with oneDNN.
bool fp32_linear_applies(const torch::Tensor& x, const torch::Tensor& w);

// x (... x K) @ w^T (w: N x K) -> ... x N, differentiable once in x and w.
torch::Tensor fp32_linear(const torch::Tensor& x, const torch::Tensor& w);

}  // namespace gpulab::train
