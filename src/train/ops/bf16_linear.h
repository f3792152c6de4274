// Bias-free linear layers under CPU bf16 autocast whose float32 weight gets a float32 gradient
// straight from weight_grad.h. Autocast runs the same bf16 products (libtorch's oneDNN ones) but
// returns the weight's gradient in bf16, which the float32 weight then widens: a llama-125m bf16
// step's copies fell from 85 to 39-48 ms on a 2-core Zen 4 without it (docs/benchmarks.md,
// 2026-12-06). The gradient is also the float32 sum itself, not its rounding to bf16.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether bf16_linear takes x @ w^T: bf16 autocast on the CPU, gpulab's kernels on, a float32
// weight [N, K] that will get a gradient (grad mode on, the weight requiring one) and a float32
// or bf16 x [..., K], a CPU whose weight_grad takes bf16.
bool bf16_linear_applies(const torch::Tensor& x, const torch::Tensor& w);

// x @ w^T in bf16 as autocast's linear computes it ([..., N], bf16); the input's gradient in bf16
// as autocast's, the weight's in float32. Not differentiable twice.
torch::Tensor bf16_linear(const torch::Tensor& x, const torch::Tensor& w);

}  // namespace gpulab::train
