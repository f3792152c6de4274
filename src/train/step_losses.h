// The training loss of every optimizer step, as the per-step curve of a task without step
// figures of its own (language and image models; GRPO has its own): kept on the device while the
// epoch runs (no host sync per step) and summed over ranks once, at the epoch's end.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "core/json.h"
#include "train/dist_hooks.h"
#include "train/tasks/train_task.h"

namespace gpulab::train {

class StepLosses {
 public:
  // A micro-batch of the step under way.
  void add(const StepLoss& s);
  // The optimizer stepped: what was added since the last step is step `step`.
  void end_step(int64_t step);
  // This epoch's steps as {"loss", "step"} records, each the mean over every rank's items of the
  // step (one all-reduce: every rank calls it, with as many steps); forgets them.
  std::vector<Json> take_epoch(DistContext& dist);

 private:
  torch::Tensor sum_;  // loss x items of the step under way, on the device
  double items_ = 0;
  std::vector<torch::Tensor> sums_;
  std::vector<double> items_of_;
  std::vector<int64_t> steps_;
};

}  // namespace gpulab::train
