// The point where a model runs one of its blocks (a transformer block, a residual stage), so that
// sharded data parallel (train/dist/sharded_model.h) can gather that block's parameters just
// before its forward and its backward and free them after. Models call run_unit(); with no hooks
// installed (one process, DDP) it is a plain call.
#pragma once

#include <torch/torch.h>

#include <functional>

namespace gpulab::train {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // Runs `forward` for `unit`, with whatever must happen around it.
  virtual torch::Tensor run(torch::nn::Module& unit,
                            const std::function<torch::Tensor()>& forward) = 0;
};

// The process's hooks (one model trains per process); nullptr removes them.
void set_unit_hooks(UnitHooks* hooks);
UnitHooks* unit_hooks();

template <typename F>
torch::Tensor run_unit(torch::nn::Module& unit, F&& forward) {
  if (UnitHooks* h = unit_hooks()) return h->run(unit, std::forward<F>(forward));
  return forward();
}

}  // namespace gpulab::train
