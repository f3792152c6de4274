// Reward failures: counting them and applying the failure policy (see reward.h).
#include "train/rl/reward.h"

#include <fmt/format.h>

namespace gpulab::train::rl {

size_t RewardScores::failed() const {
  size_t n = 0;
  for (const auto& v : values) n += v.has_value() ? 0 : 1;
  return n;
}

Result<RewardFailurePolicy> parse_reward_failure_policy(std::string_view name) {
  if (name == "stop") return RewardFailurePolicy::kStop;
  if (name == "zero") return RewardFailurePolicy::kZero;
  return Error(Code::kInvalidArgument, fmt::format("unknown reward failure policy '{}'", name),
               "use stop (a failed reward ends the run) or zero (it scores 0, counted)");
}

Result<ResolvedRewards> resolve_rewards(const Reward& reward, const RewardScores& scores,
                                        RewardFailurePolicy policy) {
  ResolvedRewards out;
  out.failed = scores.failed();
  if (out.failed > 0 && policy == RewardFailurePolicy::kStop)
    return Error(Code::kDataError,
                 fmt::format("the reward '{}' failed for {} of {} completions: {}", reward.name(),
                             out.failed, scores.values.size(), scores.failure),
                 "fix the reward, or score a failed completion 0 with the failure policy 'zero'");
  out.values.reserve(scores.values.size());
  for (const auto& v : scores.values) out.values.push_back(v.value_or(0.0));
  return out;
}

}  // namespace gpulab::train::rl
