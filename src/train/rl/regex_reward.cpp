// The regular-expression format reward (see regex_reward.h).
#include "train/rl/regex_reward.h"

namespace gpulab::train::rl {

Result<RegexReward> RegexReward::create(const std::string& pattern) {
  auto re = hf::Regex::compile(pattern, "the reward's regular expression");
  if (!re.ok()) return re.error();
  return RegexReward(pattern, std::move(re).value());
}

RewardScores RegexReward::score(std::span<const RewardSample> samples) const {
  RewardScores out;
  for (const auto& s : samples) {
    auto hit = re_.search(s.completion);
    if (!hit.ok() && out.failure.empty())
      out.failure = "'" + pattern_ + "': " + hit.error().message;
    out.values.push_back(hit.ok() ? std::optional<double>(*hit ? 1.0 : 0.0) : std::nullopt);
  }
  return out;
}

}  // namespace gpulab::train::rl
