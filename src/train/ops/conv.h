// Convolution forward for the model families: the place where a faster CPU path can replace
// torch::nn::Conv2d's own forward without changing module names, parameters or checkpoints.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// conv->forward(x), or an equivalent faster path where one exists for x's device and layout.
//
// The faster path (built only with oneDNN, GPULAB_HAVE_DNNL): fp32 on the CPU, x and the weight
// channels-last, zero padding given as numbers, grad mode on and the weight requiring grad. The
// forward is libtorch's own convolution; the backward takes grad_input from libtorch too, but
// writes the weight (and bias) gradient with oneDNN straight into the channels-last layout of the
// parameter. libtorch 1.13 reorders that gradient to dense OIHW and then copies it once more into
// channels-last (~6 % of a ResNet step). The backward is differentiable once (no double backward).
//
// Environment: GPULAB_CONV_PATH=libtorch forces conv->forward(x) everywhere (for A/B timings and
// as a way out); unset or any other value lets the faster path run where it applies.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// Whether conv2d_forward(conv, x) takes the oneDNN path now (environment and grad mode included).
bool conv2d_fast_path_applies(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// Whether this build has the oneDNN path at all (false on a host without libdnnl-dev).
bool conv2d_fast_path_built();

}  // namespace gpulab::train
