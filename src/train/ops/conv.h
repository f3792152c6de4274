// Convolution forward for the model families: the place where a faster CPU path can replace
// torch::nn::Conv2d's own forward without changing module names, parameters or checkpoints.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

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
// set_conv_path (`gpulab bench train --conv_path`) chooses among them for A/B timings.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// Which paths conv2d_forward may take, process-wide: kAuto (default) the faster paths where they
// apply; kDnnl the oneDNN weight gradient but not the sgemm path; kLibtorch conv->forward(x)
// everywhere.
enum class ConvPath { kAuto, kDnnl, kLibtorch };
void set_conv_path(ConvPath path);
ConvPath conv_path();
// "auto", "dnnl", "libtorch" -> ConvPath; nullopt for anything else.
std::optional<ConvPath> parse_conv_path(const std::string& name);

// Whether conv2d_forward(conv, x) takes a oneDNN path now (conv_path and grad mode included).
bool conv2d_fast_path_applies(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// Whether this build has the oneDNN path at all (false on a host without libdnnl-dev).
bool conv2d_fast_path_built();

}  // namespace gpulab::train
