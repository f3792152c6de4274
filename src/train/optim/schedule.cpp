// Warmup + step/cosine learning-rate schedule.
#include "train/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gpulab::train {

LrSchedule::LrSchedule(ScheduleSpec spec) : spec_(std::move(spec)) {
  spec_.steps_per_epoch = std::max<int64_t>(1, spec_.steps_per_epoch);
  total_steps_ = spec_.steps_per_epoch * std::max<int64_t>(1, spec_.total_epochs);
  warmup_steps_ = std::min<int64_t>(
      total_steps_,
      static_cast<int64_t>(std::llround(spec_.warmup_epochs * spec_.steps_per_epoch)));
}

double LrSchedule::lr_at(int64_t step) const {
  const double base = spec_.base_lr;
  // Warmup ramps linearly so the first step already moves (lr * 1/W), reaching base at step W.
  if (step < warmup_steps_) return base * static_cast<double>(step + 1) / warmup_steps_;
  if (spec_.kind == "step") {
    const int64_t epoch = step / spec_.steps_per_epoch;
    return base * std::pow(spec_.gamma, static_cast<double>(epoch / spec_.step_size));
  }
  if (spec_.kind == "cosine") {
    const int64_t span = std::max<int64_t>(1, total_steps_ - warmup_steps_);
    const double t = std::clamp(static_cast<double>(step - warmup_steps_) / span, 0.0, 1.0);
    return spec_.min_lr + 0.5 * (base - spec_.min_lr) * (1.0 + std::cos(std::numbers::pi * t));
  }
  return base;
}

}  // namespace gpulab::train
