// Convolution forward for the model families: the place where a faster CPU path can replace
// torch::nn::Conv2d's own forward without changing module names, parameters or checkpoints.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// conv->forward(x), or an equivalent faster path where one exists for x's device and layout.
//
// The faster paths (built only with oneDNN, GPULAB_HAVE_DNNL): fp32 on the CPU, x and the weight
// channels-last, zero padding given as numbers, grad mode on and the weight requiring grad.
// - A 1x1 kernel without padding, or a convolution with a single output pixel (ResNet's last stage
//   at 32 px), runs as sgemm calls on the tensors' own layouts (conv_gemm.h): libtorch's oneDNN
//   kernels reorder the whole weight into a blocked layout in each of the three passes.
// - Every other case takes libtorch's forward and grad_input, and writes the weight (and bias)
//   gradient with oneDNN straight into the channels-last layout of the parameter. libtorch 1.13
//   reorders that gradient to dense OIHW and then copies it once more into channels-last (~6 % of
//   a ResNet step).
// Both backwards are differentiable once (no double backward).
//
// Environment: GPULAB_CONV_PATH=libtorch forces conv->forward(x) everywhere (for A/B timings and
// as a way out); GPULAB_CONV_PATH=dnnl turns off the sgemm path only; unset or any other value lets
// the faster paths run where they apply.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// Whether conv2d_forward(conv, x) takes a oneDNN path now (environment and grad mode included).
bool conv2d_fast_path_applies(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// Whether this build has the oneDNN path at all (false on a host without libdnnl-dev).
bool conv2d_fast_path_built();

}  // namespace gpulab::train
