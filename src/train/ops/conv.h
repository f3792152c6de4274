// Convolution forward for the model families: the place where a faster CPU path can replace
// torch::nn::Conv2d's own forward without changing module names, parameters or checkpoints.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// conv->forward(x), or an equivalent faster path where one exists for x's device and layout.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

}  // namespace gpulab::train
