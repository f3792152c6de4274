// Dynamic loss scaling for fp16 (PyTorch's GradScaler policy): multiply the loss by a scale,
// unscale the gradients before clipping and the step, skip steps whose gradients overflowed,
// halve the scale on overflow and double it after `growth_interval` clean steps.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gpulab::train {

class LossScaler {
 public:
  // A disabled scaler passes everything through (fp32, tf32, bf16).
  explicit LossScaler(bool enabled, double init_scale = 65536.0, int64_t growth_interval = 2000);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }

  torch::Tensor scale_loss(const torch::Tensor& loss) const;
  // Divides every gradient by the scale; returns false when any gradient is inf or nan.
  bool unscale(torch::optim::Optimizer& opt);
  // Records the outcome of a step (found_inf: it was skipped) and adjusts the scale.
  void update(bool found_inf);

  int64_t skipped_steps() const { return skipped_; }

  // For checkpoints.
  struct State {
    double scale;
    int64_t good_steps;
    int64_t skipped;
  };
  State state() const { return {scale_, good_steps_, skipped_}; }
  void load(const State& s);

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace gpulab::train
