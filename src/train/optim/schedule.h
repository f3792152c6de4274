// The learning-rate schedule: per-step linear warmup, then none | step | cosine, computed from
// the global optimizer step alone, so resuming needs only the step count.
#pragma once

#include <cstdint>
#include <string>

namespace gpulab::train {

struct ScheduleSpec {
  std::string kind = "none";  // none | step | cosine
  double base_lr = 0.001;
  int64_t steps_per_epoch = 1;
  int64_t total_epochs = 1;
  double warmup_epochs = 0;
  int64_t step_size = 30;  // epochs between decays (step)
  double gamma = 0.1;      // decay factor (step)
  double min_lr = 0;       // floor of cosine
};

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleSpec spec);
  // Learning rate for optimizer step `step` (0-based).
  double lr_at(int64_t step) const;
  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t total_steps() const { return total_steps_; }
  const ScheduleSpec& spec() const { return spec_; }

 private:
  ScheduleSpec spec_;
  int64_t warmup_steps_;
  int64_t total_steps_;
};

}  // namespace gpulab::train
