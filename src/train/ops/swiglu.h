// The SwiGLU gate, silu(gate) * up, as one pass forward and one backward (libtorch runs silu,
// a product and three backward kernels, and keeps silu(gate) as well for the backward pass).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether swiglu runs the fused kernel for these operands: CPU tensors of one shape and one dtype,
// float32 or bfloat16 (the MLP's two projections, under bf16 autocast too: arithmetic in float32,
// one rounding per result where libtorch rounds silu(gate) and the product separately); other
// dtypes and devices take libtorch's ops.
bool fused_swiglu_applies(const torch::Tensor& gate, const torch::Tensor& up);

// silu(gate) * up, differentiable once in both; keeps gate and up for the backward pass.
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace gpulab::train
