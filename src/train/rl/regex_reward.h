// The format reward: 1 when the completion matches a regular expression (PCRE2, UTF-8 with
// Unicode classes), else 0. It matches anywhere unless anchored: "^<think>.*?</think>
// <answer>.*?</answer>$" asks for the whole completion; "." crosses newlines only under (?s).
#pragma once

#include <string>

#include "train/data/hf_regex.h"
#include "train/rl/reward.h"

namespace gpulab::train::rl {

class RegexReward : public Reward {
 public:
  // kInvalidArgument naming the offset PCRE2 refuses the expression at; kUnsupported in a build
  // without PCRE2.
  static Result<RegexReward> create(const std::string& pattern);
  std::string name() const override { return "regex"; }
  // A completion PCRE2 cannot finish matching within its limits is a failed score.
  RewardScores score(std::span<const RewardSample> samples) const override;

 private:
  RegexReward(std::string pattern, hf::Regex re)
      : pattern_(std::move(pattern)), re_(std::move(re)) {}
  std::string pattern_;
  hf::Regex re_;
};

}  // namespace gpulab::train::rl
