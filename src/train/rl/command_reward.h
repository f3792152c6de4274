// A reward computed by an external command: one run per batch, its stdin one JSON line per
// completion ({"prompt": as the file gave it, "completion": text, "fields": {the prompt's other
// members}}), its stdout one number per line in the same order. A run that cannot start, crashes,
// exits non-zero or passes the timeout fails every score of the batch; a line that is not a
// finite number fails that score; a wrong number of lines fails them all (which is which is
// unknown). Failures are scores, never exceptions.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "train/rl/reward.h"

namespace gpulab::train::rl {

struct CommandRewardOptions {
  std::vector<std::string> argv{};  // the program and its arguments (no shell)
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // per batch
};

class CommandReward : public Reward {
 public:
  // kInvalidArgument for no program or a timeout that is not positive.
  static Result<CommandReward> create(CommandRewardOptions opts);
  std::string name() const override;  // "command <program>"
  // The program exists and is executable (kNotFound otherwise).
  Status check(const PromptSet& set) const override;
  RewardScores score(std::span<const RewardSample> samples) const override;

  // The stdin a batch gets (one JSON line per sample; invalid UTF-8 in a completion becomes
  // U+FFFD, as a JSON text must be UTF-8).
  static std::string request(std::span<const RewardSample> samples);

 private:
  explicit CommandReward(CommandRewardOptions opts) : opts_(std::move(opts)) {}
  CommandRewardOptions opts_;
};

}  // namespace gpulab::train::rl
