// SyncBatchNorm for --sync_bn: batch statistics over the global batch (all ranks) instead of
// each rank's share. In C++ a model calls its BatchNorm modules through typed member handles,
// so swapping modules in the tree (PyTorch's convert_sync_batchnorm) would not reach the code
// that runs. Instead the aten::batch_norm kernel for autograd is overridden while sync mode is
// on: in training it computes mean and variance from all-reduced sums (differentiable, the
// all-reduce's backward all-reduces the gradient); otherwise it defers to the stock kernel.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "train/dist/communicator.h"

namespace gpulab::train::dist {

// Turns sync mode on for every BatchNorm of this process (any model), or off (nullptr).
void set_sync_batch_norm(std::shared_ptr<Communicator> comm);
bool sync_batch_norm_enabled();

// The synchronised computation itself (N×C×... input); updates running stats like BatchNorm.
torch::Tensor sync_batch_norm(const torch::Tensor& input, const torch::Tensor& weight,
                              const torch::Tensor& bias, const torch::Tensor& running_mean,
                              const torch::Tensor& running_var, double momentum, double eps,
                              Communicator& comm);

}  // namespace gpulab::train::dist
