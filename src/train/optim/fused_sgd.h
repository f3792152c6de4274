// SGD with momentum, weight decay and Nesterov in one pass over each parameter: libtorch's SGD
// (and torch.optim.SGD's default, single-tensor path) makes three or four passes and allocates
// a temporary per parameter, which for ResNet-50's 25 M parameters is a few percent of a CPU
// training step. Same state, options and checkpoint format as torch::optim::SGD.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace gpulab::train {

class FusedSgd : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  // The update of torch.optim.SGD:
  //   g = grad + wd * p;  buf = g on the first step, else momentum * buf + (1 - dampening) * g;
  //   g = nesterov ? g + momentum * buf : buf;  p -= lr * g
  // with the same roundings as libtorch's element-wise kernels (fused multiply-adds where they
  // use them). float32 CPU parameters whose gradient and buffer share their layout take the one
  // pass; any other parameter takes libtorch's own sequence of ops.
  torch::Tensor step(LossClosure closure = nullptr) override;

  // How many parameters the last step updated in one pass (the rest took the ops).
  int64_t fused_params() const { return fused_params_; }

 private:
  int64_t fused_params_ = 0;
};

}  // namespace gpulab::train
