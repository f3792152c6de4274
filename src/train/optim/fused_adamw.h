// AdamW through at::_fused_adamw_, the op torch.optim.AdamW(fused=True) runs on GPUs and CPUs:
// one pass over each parameter, where libtorch's own AdamW makes about ten and allocates
// temporaries per parameter. Same update, state (step, exp_avg, exp_avg_sq) and checkpoint
// format as torch::optim::AdamW.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  // The update of torch.optim.AdamW (amsgrad off):
  //   p *= 1 - lr * wd;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
  //   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  // Dense parameters of any floating dtype and device take the op, one call per device and
  // dtype; any other (or amsgrad) takes libtorch's step.
  torch::Tensor step(LossClosure closure = nullptr) override;
  int64_t fused_params() const { return fused_params_; }

 private:
  // The parameter's state, created on its first step, its moments in the parameter's layout.
  torch::optim::AdamWParamState& state_of(const torch::Tensor& p);
  int64_t fused_params_ = 0;
};

}  // namespace gpulab::train
