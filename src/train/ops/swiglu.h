// The SwiGLU gate, silu(gate) * up, as one pass forward and one backward (libtorch runs silu,
// a product and three backward kernels, and keeps silu(gate) as well for the backward pass).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether swiglu runs the fused kernel for these operands: float32 CPU tensors of one shape
// (the MLP's two projections); other dtypes and devices take libtorch's ops.
bool fused_swiglu_applies(const torch::Tensor& gate, const torch::Tensor& up);

// silu(gate) * up, differentiable once in both; keeps gate and up for the backward pass.
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace gpulab::train
