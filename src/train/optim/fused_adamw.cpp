// AdamW through at::_fused_adamw_ (see fused_adamw.h).
#include "train/optim/fused_adamw.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "train/optim/state_key.h"

namespace gpulab::train {
namespace {

// The tensors of one _fused_adamw_ call: one device and dtype, as the op requires.
struct FusedBatch {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
};

// The op walks parameter, gradient and both moments element by element in one layout.
bool adamw_takes(const torch::Tensor& p, const torch::Tensor& g) {
  return p.is_floating_point() && !g.is_sparse() && g.scalar_type() == p.scalar_type() &&
         g.device() == p.device() && p.is_contiguous() && g.is_contiguous();
}

}  // namespace

torch::optim::AdamWParamState& FusedAdamW::state_of(const torch::Tensor& p) {
  const StateKey key = state_key(p);
  auto it = state_.find(key);
  if (it == state_.end()) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    it = state_.emplace(key, std::move(fresh)).first;
  }
  auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
  // Moments restored from a checkpoint in another layout take the parameter's once.
  if (!st.exp_avg().is_contiguous()) st.exp_avg(st.exp_avg().contiguous());
  if (!st.exp_avg_sq().is_contiguous()) st.exp_avg_sq(st.exp_avg_sq().contiguous());
  return st;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  RECORD_FUNCTION("gpulab::FusedAdamW::step", std::vector<c10::IValue>());
  std::vector<torch::Tensor> others;  // for libtorch's own step
  fused_params_ = 0;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::map<std::tuple<c10::DeviceType, c10::DeviceIndex, c10::ScalarType>, FusedBatch> batches;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (o.amsgrad() || !adamw_takes(p, p.grad())) {
        others.push_back(p);
        continue;
      }
      auto& st = state_of(p);
      st.step(st.step() + 1);
      auto& b = batches[{p.device().type(), p.device().index(), p.scalar_type()}];
      b.params.push_back(p);
      b.grads.push_back(p.grad());
      b.exp_avgs.push_back(st.exp_avg());
      b.exp_avg_sqs.push_back(st.exp_avg_sq());
      // torch.optim.AdamW(fused=True) keeps the step as a float32 tensor beside the parameter
      // and counts it up before the op, which reads it for the bias corrections.
      b.steps.push_back(
          torch::full({}, static_cast<double>(st.step()),
                      torch::TensorOptions().dtype(torch::kFloat).device(p.device())));
    }
    const auto [beta1, beta2] = o.betas();
    for (auto& [kind, b] : batches) {
      at::_fused_adamw_(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, {}, b.steps, o.lr(), beta1,
                        beta2, o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false);
      fused_params_ += static_cast<int64_t>(b.params.size());
    }
  }
  if (!others.empty()) {
    // Hide the fused parameters' gradients from libtorch's step, then restore them.
    std::vector<std::pair<torch::Tensor, torch::Tensor>> hidden;
    for (auto& group : param_groups_)
      for (auto& p : group.params())
        if (p.grad().defined() &&
            std::find_if(others.begin(), others.end(),
                         [&](const torch::Tensor& q) { return q.is_same(p); }) == others.end()) {
          hidden.emplace_back(p, p.grad());
          p.mutable_grad() = torch::Tensor();
        }
    torch::optim::AdamW::step();
    for (auto& [p, g] : hidden) p.mutable_grad() = g;
  }
  return loss;
}

}  // namespace gpulab::train
