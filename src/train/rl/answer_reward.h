// The verifiable "final answer" reward: 1 when the answer extracted from a completion equals a
// field of its prompt (exactly, or as a number within a tolerance), else 0. The extraction is
// named: the last number in the text, the inside of the last <answer>…</answer>, the inside of
// the last \boxed{…}, or the whole completion; surrounding whitespace never counts.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "train/rl/reward.h"

namespace gpulab::train::rl {

enum class AnswerExtraction { kLastNumber, kAnswerTag, kBoxed, kWhole };
enum class AnswerMatch { kExact, kNumeric };

struct AnswerRewardOptions {
  std::string field = "answer";  // the prompt's member holding the right answer
  AnswerExtraction extraction = AnswerExtraction::kLastNumber;
  AnswerMatch match = AnswerMatch::kNumeric;
  double tolerance = 1e-6;  // kNumeric: |extracted - field| <= tolerance
};

// "last_number", "answer_tag", "boxed", "whole"; anything else kInvalidArgument naming them.
Result<AnswerExtraction> parse_answer_extraction(std::string_view name);

// The answer in a completion; nullopt when it has none (no number, no closed tag).
// kLastNumber: an optional '-', digits with optional thousands commas ("1,234"), an optional
// fraction (".5", "3.25"); returned without the commas. A '-' right after a letter or digit is
// an operator ("3-4" ends in 4), not a sign.
std::optional<std::string> extract_answer(std::string_view completion, AnswerExtraction how);

// A number written as text ("42", " -3.5 ", "1,234", "+7"), or nullopt.
std::optional<double> parse_answer_number(std::string_view text);

class AnswerReward : public Reward {
 public:
  // kInvalidArgument for an empty field name or a negative or non-finite tolerance.
  static Result<AnswerReward> create(AnswerRewardOptions opts);
  std::string name() const override { return "answer"; }
  // Every prompt has the field; for kNumeric it is a number or a string holding one.
  Status check(const PromptSet& set) const override;
  RewardScores score(std::span<const RewardSample> samples) const override;

 private:
  explicit AnswerReward(AnswerRewardOptions opts) : opts_(std::move(opts)) {}
  double score_one(const RewardSample& s) const;
  AnswerRewardOptions opts_;
};

}  // namespace gpulab::train::rl
