// Reward specs to rewards (see reward_spec.h).
#include "train/rl/reward_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "train/rl/regex_reward.h"
#include "train/rl/weighted_reward.h"

namespace gpulab::train::rl {

namespace {

Error bad_spec(const std::string& message) {
  return Error(Code::kInvalidArgument, "--reward: " + message,
               "write terms joined by '+', each [WEIGHT*]NAME with NAME one of " +
                   join(reward_term_names(), ", ") + " (e.g. --reward \"answer+0.2*regex\")");
}

Result<RewardTerm> parse_term(const std::string& text) {
  RewardTerm term;
  term.name = text;
  if (const auto star = text.find('*'); star != std::string::npos) {
    const auto w = parse_double(text.substr(0, star));
    if (!w || !std::isfinite(*w))
      return bad_spec(fmt::format("'{}' is not a weight in '{}'", text.substr(0, star), text));
    term.weight = *w;
    term.name = text.substr(star + 1);
  }
  const auto& names = reward_term_names();
  if (std::find(names.begin(), names.end(), term.name) == names.end())
    return bad_spec(fmt::format("unknown reward '{}'", term.name));
  return term;
}

Result<std::shared_ptr<const Reward>> build_term(const std::string& name,
                                                 const RewardSpecOptions& o) {
  if (name == "answer") {
    auto r = AnswerReward::create(o.answer);
    if (!r) return r.error();
    return std::shared_ptr<const Reward>(std::make_shared<AnswerReward>(std::move(*r)));
  }
  if (name == "regex") {
    if (o.regex.empty())
      return Error(
          Code::kInvalidArgument, "--reward names regex but --reward_regex is empty",
          "pass --reward_regex PATTERN (e.g. \"^<think>.*?</think><answer>.*?</answer>$\")");
    auto r = RegexReward::create(o.regex);
    if (!r) return Error(r.error().code, "--reward_regex: " + r.error().message, r.error().hint);
    return std::shared_ptr<const Reward>(std::make_shared<RegexReward>(std::move(*r)));
  }
  if (o.command.argv.empty())
    return Error(Code::kInvalidArgument, "--reward names command but --reward_command is empty",
                 "pass --reward_command \"PROGRAM ARGS\": it reads JSONL on stdin and writes one "
                 "number a line");
  auto r = CommandReward::create(o.command);
  if (!r) return r.error();
  return std::shared_ptr<const Reward>(std::make_shared<CommandReward>(std::move(*r)));
}

}  // namespace

const std::vector<std::string>& reward_term_names() {
  static const std::vector<std::string> names = {"answer", "regex", "command"};
  return names;
}

Result<std::vector<RewardTerm>> parse_reward_spec(std::string_view spec) {
  std::string compact;
  for (char c : spec)
    if (c != ' ' && c != '\t') compact += c;
  if (compact.empty()) return bad_spec("the spec is empty");
  std::vector<RewardTerm> terms;
  for (const std::string& text : split(compact, '+', /*skip_empty=*/false)) {
    if (text.empty()) return bad_spec(fmt::format("an empty term in '{}'", spec));
    auto term = parse_term(text);
    if (!term) return term.error();
    for (const auto& t : terms)
      if (t.name == term->name) return bad_spec(fmt::format("'{}' is named twice", t.name));
    terms.push_back(std::move(*term));
  }
  return terms;
}

Result<std::shared_ptr<const Reward>> build_reward(const RewardSpecOptions& opts) {
  auto terms = parse_reward_spec(opts.spec);
  if (!terms) return terms.error();
  std::vector<WeightedPart> parts;
  for (const auto& t : *terms) {
    auto r = build_term(t.name, opts);
    if (!r) return r.error();
    parts.push_back({std::move(*r), t.weight});
  }
  if (parts.size() == 1 && parts.front().weight == 1.0) return parts.front().reward;
  auto sum = WeightedReward::create(std::move(parts));
  if (!sum) return sum.error();
  return std::shared_ptr<const Reward>(std::make_shared<WeightedReward>(std::move(*sum)));
}

}  // namespace gpulab::train::rl
