// Weighted sums of rewards (see weighted_reward.h).
#include "train/rl/weighted_reward.h"

#include <fmt/format.h>

#include <cmath>

namespace gpulab::train::rl {

Result<WeightedReward> WeightedReward::create(std::vector<WeightedPart> parts) {
  if (parts.empty())
    return Error(Code::kInvalidArgument, "a weighted reward needs at least one reward");
  for (const auto& p : parts) {
    if (!p.reward) return Error(Code::kInvalidArgument, "a weighted reward's part has no reward");
    if (!std::isfinite(p.weight))
      return Error(Code::kInvalidArgument,
                   fmt::format("the weight of the reward '{}' is not finite", p.reward->name()));
  }
  return WeightedReward(std::move(parts));
}

std::string WeightedReward::name() const {
  std::string out;
  for (const auto& p : parts_)
    out += fmt::format("{}{}*{}", out.empty() ? "" : " + ", p.weight, p.reward->name());
  return out;
}

Status WeightedReward::check(const PromptSet& set) const {
  for (const auto& p : parts_)
    if (auto s = p.reward->check(set); !s.ok()) return s;
  return ok_status();
}

RewardScores WeightedReward::score(std::span<const RewardSample> samples) const {
  RewardScores out;
  out.values.assign(samples.size(), 0.0);
  for (const auto& p : parts_) {
    const RewardScores part = p.reward->score(samples);
    if (out.failure.empty() && !part.failure.empty())
      out.failure = p.reward->name() + ": " + part.failure;
    for (size_t i = 0; i < samples.size(); ++i) {
      const bool ok = i < part.values.size() && part.values[i].has_value();
      if (!ok && out.failure.empty())
        out.failure = p.reward->name() + " gave no score for every completion";
      if (!ok || !out.values[i])
        out.values[i] = std::nullopt;
      else
        *out.values[i] += p.weight * *part.values[i];
    }
  }
  return out;
}

}  // namespace gpulab::train::rl
