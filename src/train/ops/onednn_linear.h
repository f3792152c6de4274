// Float32 linear layers on a CPU with AVX-512, the products routed by what does each best there:
// y = x @ w^T and the input's gradient through oneDNN's matmul (libtorch's
// mkldnn::_linear_pointwise, the kernel torch.compile picks on CPUs), the weight's gradient through
// gpulab's own kernel (weight_grad.h; MKL's sgemm, as libtorch's linear, where that does not
// apply). On a 2-core Zen 4 at a llama-125m step's shapes oneDNN ran the first two 1.05-1.76x
// faster than MKL (one cell 0.93) and the third 0.73-1.09x from 256 rows up
// (bench/linear_backends.py; docs/benchmarks.md, 2026-12-05); on AVX2 alone oneDNN was 0.94x, so
// there libtorch's linear stays.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Rows of x at least this many: the fewest the comparison measured (decode steps take their own
// products first).
inline constexpr int64_t kOnednnMinRows = 16;

// Whether x @ w^T is a product gpulab's CPU kernels take in float32: both float32 on the CPU, no
// autocast (whose product would be bf16) and gpulab's kernels on.
bool float32_cpu_product(const torch::Tensor& x, const torch::Tensor& w);

// Whether onednn_linear takes the product: float32 CPU x [..., K] (kOnednnMinRows rows or more) and
// w [N, K], no autocast, gpulab's CPU kernels on, a CPU with AVX-512 (f, bw, vl, dq) and a libtorch
// that registered the oneDNN op.
bool onednn_linear_applies(const torch::Tensor& x, const torch::Tensor& w);

// x @ w^T, shaped [..., N], with gradients for what needs them. Its backward is not itself
// differentiable (no double backward).
torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& w);

// A linear layer's x @ w^T + bias: onednn_linear where it applies, bf16_linear (bf16_linear.h) for
// a bias-free layer under CPU bf16 autocast where that applies, libtorch's linear elsewhere.
torch::Tensor dense_linear(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& bias = {});

}  // namespace gpulab::train
