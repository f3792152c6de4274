// Per-step training losses (see step_losses.h).
#include "train/step_losses.h"

#include <algorithm>

namespace gpulab::train {

void StepLosses::add(const StepLoss& s) {
  const auto part = s.loss.detach().to(torch::kDouble) * static_cast<double>(s.count);
  sum_ = sum_.defined() ? sum_ + part : part;
  items_ += static_cast<double>(s.count);
}

void StepLosses::end_step(int64_t step) {
  if (!sum_.defined()) return;
  sums_.push_back(sum_);
  items_of_.push_back(items_);
  steps_.push_back(step);
  sum_ = torch::Tensor();
  items_ = 0;
}

std::vector<Json> StepLosses::take_epoch(DistContext& dist) {
  const auto n = static_cast<int64_t>(steps_.size());
  // Loss sums then item counts, in one tensor: one collective for the epoch.
  auto both = torch::zeros({2 * n}, torch::kDouble);
  if (n > 0) {
    both.slice(0, 0, n).copy_(torch::stack(sums_).cpu());
    both.slice(0, n).copy_(torch::tensor(items_of_, torch::kDouble));
  }
  dist.all_reduce_sum(both);
  std::vector<Json> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(
        Json{{"step", steps_[static_cast<size_t>(i)]},
             {"loss", both[i].item<double>() / std::max(1.0, both[n + i].item<double>())}});
  sums_.clear();
  items_of_.clear();
  steps_.clear();
  return out;
}

}  // namespace gpulab::train
