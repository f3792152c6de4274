// A weighted sum of rewards (e.g. 1.0 × answer + 0.2 × format): each sample's total is
// Σ wᵢ·rᵢ; a sample any part of which failed has a failed total, with that part's reason.
#pragma once

#include <memory>
#include <vector>

#include "train/rl/reward.h"

namespace gpulab::train::rl {

struct WeightedPart {
  std::shared_ptr<const Reward> reward;
  double weight = 1.0;
};

class WeightedReward : public Reward {
 public:
  // kInvalidArgument for no parts, a missing reward, or a non-finite weight.
  static Result<WeightedReward> create(std::vector<WeightedPart> parts);
  std::string name() const override;                  // "1*answer + 0.2*regex"
  Status check(const PromptSet& set) const override;  // every part's
  RewardScores score(std::span<const RewardSample> samples) const override;

 private:
  explicit WeightedReward(std::vector<WeightedPart> parts) : parts_(std::move(parts)) {}
  std::vector<WeightedPart> parts_;
};

}  // namespace gpulab::train::rl
