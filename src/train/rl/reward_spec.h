// A run's reward from its flags: a spec that sums weighted terms ("answer", "answer+0.2*regex",
// "0.5*command"), each term one of the built-in rewards (answer, regex) or the external command,
// configured by their own flags. One place turns flags into an rl::Reward, before any rank starts.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "train/rl/answer_reward.h"
#include "train/rl/command_reward.h"
#include "train/rl/reward.h"

namespace gpulab::train::rl {

struct RewardTerm {
  double weight = 1.0;
  std::string name;  // answer, regex or command
};

// The names a term may take.
const std::vector<std::string>& reward_term_names();

// "answer+0.2*regex" -> {1 answer, 0.2 regex}. Spaces are ignored. An empty spec, an unknown name,
// a weight that is not a finite number or a name given twice is kInvalidArgument naming --reward.
Result<std::vector<RewardTerm>> parse_reward_spec(std::string_view spec);

struct RewardSpecOptions {
  std::string spec = "answer";
  AnswerRewardOptions answer{};
  std::string regex{};             // the regex term's pattern
  CommandRewardOptions command{};  // the command term's program
};

// The reward the spec names (one term of weight 1: that reward itself; else their weighted sum).
// A regex term without a pattern or a command term without a program is kInvalidArgument naming
// the flag to pass.
Result<std::shared_ptr<const Reward>> build_reward(const RewardSpecOptions& opts);

}  // namespace gpulab::train::rl
