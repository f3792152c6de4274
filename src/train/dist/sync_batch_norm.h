// SyncBatchNorm for --sync_bn: batch statistics over the global batch (all ranks) instead of
// each rank's share, as a module that takes each BatchNorm's place in the model (PyTorch's
// convert_sync_batchnorm): same name, same parameters and buffers (the very tensors), so
// checkpoints and the optimizer see no difference. In training it computes mean and variance
// from all-reduced sums (differentiable: the all-reduce's backward all-reduces the gradient);
// otherwise, or in a world of one, it is torch's BatchNorm.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "train/dist/communicator.h"
#include "train/models/batch_norm.h"

namespace gpulab::train::dist {

class SyncBatchNormImpl : public torch::nn::Module {
 public:
  // Takes over `bn`'s options, parameters and buffers, registered under the same names.
  SyncBatchNormImpl(const train::BatchNorm2dImpl& bn, std::shared_ptr<Communicator> comm);

  torch::Tensor forward(const torch::Tensor& input);
  void pretty_print(std::ostream& stream) const override;

  torch::nn::BatchNormOptions options;
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  std::shared_ptr<Communicator> comm_;
};
TORCH_MODULE(SyncBatchNorm);

// Replaces every BatchNorm2d of `model` (train/models/batch_norm.h) by a SyncBatchNorm over
// `comm`, and returns how many. Throws gpulab::Exception (kUnsupported) for a torch BatchNorm
// module that the model would keep calling directly, since it would silently not synchronise.
int convert_sync_batch_norm(torch::nn::Module& model, const std::shared_ptr<Communicator>& comm);

// The synchronised computation itself (N×C×... input); updates running stats like BatchNorm.
torch::Tensor sync_batch_norm(const torch::Tensor& input, const torch::Tensor& weight,
                              const torch::Tensor& bias, const torch::Tensor& running_mean,
                              const torch::Tensor& running_var, double momentum, double eps,
                              Communicator& comm);

}  // namespace gpulab::train::dist
