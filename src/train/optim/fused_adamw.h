// AdamW in one pass over each parameter: torch.optim.AdamW's default (single-tensor) path, like
// libtorch's, makes about ten passes and allocates temporaries per parameter. Same update, state
// (step, exp_avg, exp_avg_sq) and checkpoint format as torch::optim::AdamW.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  // The update of torch.optim.AdamW (amsgrad off):
  //   p *= 1 - lr * wd;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
  //   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  // Dense float32 CPU parameters take the one pass; any other (or amsgrad) takes libtorch's.
  torch::Tensor step(LossClosure closure = nullptr) override;
  int64_t fused_params() const { return fused_params_; }

 private:
  int64_t fused_params_ = 0;
};

}  // namespace gpulab::train
