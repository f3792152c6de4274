// Dynamic loss scaler for fp16 training.
#include "train/optim/loss_scaler.h"

namespace gpulab::train {

LossScaler::LossScaler(bool enabled, double init_scale, int64_t growth_interval)
    : enabled_(enabled), scale_(enabled ? init_scale : 1.0), growth_interval_(growth_interval) {}

torch::Tensor LossScaler::scale_loss(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool LossScaler::unscale(torch::optim::Optimizer& opt) {
  if (!enabled_) return true;
  torch::NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  std::vector<torch::Tensor> flags;
  for (auto& group : opt.param_groups()) {
    for (auto& p : group.params()) {
      auto& g = p.mutable_grad();
      if (!g.defined()) continue;
      g.mul_(inv);
      // One flag per tensor, summed once: a single host sync per step, not one per parameter.
      flags.push_back(g.isfinite().all().logical_not());
    }
  }
  if (flags.empty()) return true;
  return !torch::stack(flags).any().item<bool>();
}

void LossScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ = std::max(scale_ * 0.5, 1.0);
    good_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++good_steps_ >= growth_interval_) {
    scale_ *= 2.0;
    good_steps_ = 0;
  }
}

void LossScaler::load(const State& s) {
  scale_ = s.scale;
  good_steps_ = s.good_steps;
  skipped_ = s.skipped;
}

}  // namespace gpulab::train
