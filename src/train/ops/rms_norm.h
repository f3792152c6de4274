// RMSNorm fused for the CPU: one pass forward and one backward over each row, statistics in
// float32, where libtorch runs six kernels forward (cast, square, mean, rsqrt, two products) and
// keeps their intermediates for the backward pass.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether rms_norm runs the fused kernel: CPU, x float32 or bfloat16, weight float32 of x's last
// size, result float32 or bfloat16; float64 (the numerics checks) and other devices take
// libtorch's ops.
bool fused_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& weight,
                            torch::ScalarType result);

// weight * x / sqrt(mean(x^2 over the last dimension) + eps) in float32, stored as `result`: the
// caller passes bfloat16 where every consumer would cast the norm's output to bfloat16 anyway
// (linear layers under bf16 autocast), so the value is rounded once and not cast per consumer.
// Differentiable once in x and weight (weight's gradient in float32, summed over rows in a fixed
// order whatever the thread count); keeps x and one float32 per row.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                       torch::ScalarType result);

}  // namespace gpulab::train
