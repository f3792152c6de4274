// The post hooks on gradient accumulators and the end-of-backward callback of grad_hooks.h.
#include "train/dist/grad_hooks.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <utility>

#include "core/error.h"

namespace gpulab::train::dist {

namespace {

class GradReadyHook : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::function<void(std::size_t)> ready, std::size_t index)
      : ready_(std::move(ready)), index_(index) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    ready_(index_);
    return outputs;
  }

 private:
  std::function<void(std::size_t)> ready_;
  std::size_t index_;
};

}  // namespace

std::vector<GradAccumulatorPtr> on_each_grad_ready(const std::vector<torch::Tensor>& params,
                                                   std::function<void(std::size_t)> ready) {
  std::vector<GradAccumulatorPtr> accumulators;
  for (std::size_t k = 0; k < params.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params[k]);
    GPULAB_ASSERT(acc, "a parameter that requires grad has no gradient accumulator");
    acc->add_post_hook(std::make_unique<GradReadyHook>(ready, k));
    accumulators.push_back(std::move(acc));
  }
  return accumulators;
}

void at_backward_end(std::function<void()> fn) {
  torch::autograd::Engine::get_default_engine().queue_callback(std::move(fn));
}

}  // namespace gpulab::train::dist
