// SGD with momentum, weight decay and Nesterov through at::_fused_sgd_, the op
// torch.optim.SGD(fused=True) runs on GPUs and CPUs: one pass over each parameter, where
// libtorch's SGD makes three or four and allocates a temporary per parameter (a few percent of a
// CPU training step for ResNet-50's 25 M parameters). Same state, options and checkpoint format
// as torch::optim::SGD.
#pragma once

#include <torch/torch.h>

#include <map>
#include <tuple>
#include <vector>

namespace gpulab::train {

class FusedSgd : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  // The update of torch.optim.SGD:
  //   g = grad + wd * p;  buf = g on the first step, else momentum * buf + (1 - dampening) * g;
  //   g = nesterov ? g + momentum * buf : buf;  p -= lr * g
  // Dense parameters of any floating dtype and device whose gradient and buffer share their
  // memory order take the op (one call per device, dtype and first step); any other takes
  // libtorch's own sequence of ops.
  torch::Tensor step(LossClosure closure = nullptr) override;

  // How many parameters the last step updated through the op (the rest took the ops).
  int64_t fused_params() const { return fused_params_; }

 private:
  struct FusedBatch;
  using Batches =
      std::map<std::tuple<c10::DeviceType, c10::DeviceIndex, c10::ScalarType, bool>, FusedBatch>;
  void add_to_batch(const torch::Tensor& p, bool momentum, Batches& batches);
  void libtorch_update(torch::Tensor& p, const torch::optim::SGDOptions& o);
  int64_t fused_params_ = 0;
};

}  // namespace gpulab::train
