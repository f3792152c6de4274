// The BatchNorm2d the models here build: torch's BatchNorm2d (same parameters, buffers, names and
// arithmetic), plus a hand-over for when another module takes its place in the model's tree
// (SyncBatchNorm under --sync_bn, train/dist/sync_batch_norm.h). A C++ model calls its BatchNorm
// through a typed member or a Sequential entry, not through the tree, so the module that left
// the tree passes its calls on to the one that replaced it. (Not a subclass of torch's module:
// libtorch does not export all that a subclass needs.)
#pragma once

#include <torch/torch.h>

#include <functional>
#include <ostream>

namespace gpulab::train {

class BatchNorm2dImpl : public torch::nn::Cloneable<BatchNorm2dImpl> {
 public:
  explicit BatchNorm2dImpl(int64_t num_features)
      : BatchNorm2dImpl(torch::nn::BatchNormOptions(num_features)) {}
  explicit BatchNorm2dImpl(const torch::nn::BatchNormOptions& options);

  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // torch's BatchNorm2d, or the forward of the module that replaced this one.
  torch::Tensor forward(const torch::Tensor& input);

  // Called once the replacement holds this module's parameters and buffers and has taken its
  // name in the parent (Module::replace_module): calls of forward go to `forward` from now on.
  void hand_over_to(std::function<torch::Tensor(const torch::Tensor&)> forward);

  torch::nn::BatchNormOptions options;
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  std::function<torch::Tensor(const torch::Tensor&)> replacement_;
};
TORCH_MODULE(BatchNorm2d);

}  // namespace gpulab::train
