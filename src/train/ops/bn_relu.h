// BatchNorm followed by ReLU, optionally with a residual added in between (ResNet's blocks): one
// call site, so that a fused kernel can replace the three passes where it is faster.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// relu(bn(x) + residual), residual optional (undefined: relu(bn(x))). Same numbers, running
// statistics and autograd as bn->forward(x), `+= residual`, relu_().
torch::Tensor batch_norm_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                              const torch::Tensor& residual = {});

}  // namespace gpulab::train
