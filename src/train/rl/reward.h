// A GRPO reward: scores a batch of completions (each with the prompt it answers and that prompt's
// fields). A score can fail (an external command that crashed, hung or printed garbage); the
// failure policy says whether a failure stops the run or scores 0, and failures are counted.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "train/rl/prompt_set.h"

namespace gpulab::train::rl {

struct RewardSample {
  const Prompt* prompt = nullptr;
  std::string_view completion;
};

struct RewardScores {
  std::vector<std::optional<double>> values;  // one per sample; nullopt: this score failed
  std::string failure;                        // why the first failed one did
  size_t failed() const;
};

class Reward {
 public:
  virtual ~Reward() = default;
  virtual std::string name() const = 0;
  // Before any rank starts: refuses a prompt set some prompt of which lacks what this reward
  // reads, or a reward that cannot run here, naming the file and line or the command.
  virtual Status check(const PromptSet& set) const { return ok_status(); }
  // Never throws for anything a completion or a command does; a score it cannot give is nullopt.
  virtual RewardScores score(std::span<const RewardSample> samples) const = 0;
};

enum class RewardFailurePolicy { kStop, kZero };

// "stop" or "zero"; anything else kInvalidArgument naming both.
Result<RewardFailurePolicy> parse_reward_failure_policy(std::string_view name);

struct ResolvedRewards {
  std::vector<double> values;
  size_t failed = 0;  // scored 0 under kZero; reported either way
};

// The scores as numbers: under kStop any failure is kDataError naming the reward, how many of
// the batch failed and why the first did; under kZero a failed score is 0 and counted.
Result<ResolvedRewards> resolve_rewards(const Reward& reward, const RewardScores& scores,
                                        RewardFailurePolicy policy);

}  // namespace gpulab::train::rl
