// BatchNorm followed by ReLU, optionally with a residual added in between (ResNet's blocks): one
// call site, so that a fused kernel can replace the three passes where it is faster.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// relu(bn(x) + residual), residual optional (undefined: relu(bn(x))). Same numbers, running
// statistics and autograd as bn->forward(x), `+= residual`, relu_().
//
// Where batch_norm_relu_fused() says so, this runs as one custom autograd function on the CPU:
// one pass for the batch statistics, one writing y = max(0, x*scale + shift [+ residual]); in
// backward one reduction pass and one pass writing the input gradient (the residual's gradient
// is the masked output gradient that the reduction pass writes anyway). Everything else takes
// libtorch's modules and ops, as before.
//
// Off by default, GPULAB_BN_RELU_PATH=fused (environment, read on every call) turns it on: on a
// quiet machine it measured slower than libtorch's path (Fashion-MNIST epoch 1007-1013 vs
// 1057-1088 img/s), and training with it was worse in both seeds tried (epoch-1 loss 1.18 vs
// 0.51 and 1.20 vs 0.97 at lr 0.1), which per-op parity tests up to N=32 did not explain yet.
torch::Tensor batch_norm_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                              const torch::Tensor& residual = {});

// Whether batch_norm_relu(bn, x, residual) takes the fused kernel: CPU float32, 4-D x in
// channels-last memory order (an [N*H*W, C] matrix, more than one row, C a multiple of 16), bn in
// training mode with affine weight and bias and running statistics, a residual (if any) of x's
// shape and layout, SyncBatchNorm off (its global-batch statistics need libtorch's path) and
// GPULAB_BN_RELU_PATH=fused.
bool batch_norm_relu_fused(const torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                           const torch::Tensor& residual = {});

}  // namespace gpulab::train
