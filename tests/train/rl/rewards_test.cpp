// The built-in verifiable rewards: answer extraction (last number, <answer> tag, \boxed{}, whole)
// and its exact and numeric comparison, the prompts' fields checked before a run, the regular
// expression format reward (PCRE2), weighted sums, and the failure policy's stop and zero.
#include <gtest/gtest.h>

#include <cmath>

#include "train/rl/answer_reward.h"
#include "train/rl/command_reward.h"
#include "train/rl/regex_reward.h"
#include "train/rl/weighted_reward.h"

namespace gpulab::train::rl {
namespace {

using Extract = AnswerExtraction;

TEST(AnswerReward, ExtractsTheNamedAnswer) {
  const std::vector<std::tuple<std::string, Extract, std::optional<std::string>>> cases = {
      {"The answer is 42.", Extract::kLastNumber, "42"},
      {"-3 apples, then 1,234 pears", Extract::kLastNumber, "1234"},
      {"x = -0.5", Extract::kLastNumber, "-0.5"},
      {"3-4", Extract::kLastNumber, "4"},       // an operator, not a sign
      {"so 1,23", Extract::kLastNumber, "23"},  // not a thousands comma
      {"$1,000,000 in total", Extract::kLastNumber, "1000000"},
      {"about .5 of it", Extract::kLastNumber, ".5"},
      {"no digits here", Extract::kLastNumber, std::nullopt},
      {"<answer> 7 </answer> no, <answer>8</answer>", Extract::kAnswerTag, "8"},
      {"<answer>7", Extract::kAnswerTag, std::nullopt},
      {"</answer> <answer>", Extract::kAnswerTag, std::nullopt},
      {"so \\boxed{\\frac{1}{2}} done", Extract::kBoxed, "\\frac{1}{2}"},
      {"\\boxed{1} and \\boxed{2", Extract::kBoxed, std::nullopt},
      {"  yes \n", Extract::kWhole, "yes"},
  };
  for (const auto& [text, how, want] : cases) {
    SCOPED_TRACE(text);
    EXPECT_EQ(extract_answer(text, how), want);
  }
}

TEST(AnswerReward, ParsesNumbersAsWrittenAndRefusesTheRest) {
  EXPECT_EQ(parse_answer_number(" 1,234 "), 1234.0);
  EXPECT_EQ(parse_answer_number("+7"), 7.0);
  EXPECT_EQ(parse_answer_number("-0.25"), -0.25);
  for (const char* bad : {"", "abc", "7 apples", "inf", "nan", "1e400", "--1", "1,2345"})
    EXPECT_EQ(parse_answer_number(bad), std::nullopt) << bad;
}

PromptSet two_prompts() {
  return parse_prompt_set(
             "{\"prompt\": \"a\", \"answer\": 5}\n{\"prompt\": \"b\", \"answer\": \"1,000.5\"}",
             "p.jsonl")
      .value_or_throw();
}

std::vector<double> scored(const Reward& r, const PromptSet& set,
                           const std::vector<std::pair<size_t, std::string>>& completions) {
  std::vector<RewardSample> samples;
  for (const auto& [i, c] : completions) samples.push_back({&set.prompts[i], c});
  std::vector<double> out;
  for (const auto& v : r.score(samples).values) out.push_back(v.value_or(-1.0));
  return out;
}

TEST(AnswerReward, ComparesNumericallyWithinTheToleranceOrExactly) {
  const auto set = two_prompts();
  auto numeric = AnswerReward::create({.tolerance = 0.01}).value_or_throw();
  ASSERT_TRUE(numeric.check(set).ok());
  EXPECT_EQ(scored(numeric, set,
                   {{0, "so 5"},
                    {0, "5.009"},
                    {0, "5.02"},
                    {0, "none"},
                    {1, "1000.5"},
                    {1, "it is 1,000.505!"}}),
            (std::vector<double>{1, 1, 0, 0, 1, 1}));
  auto exact =
      AnswerReward::create({.extraction = Extract::kAnswerTag, .match = AnswerMatch::kExact})
          .value_or_throw();
  EXPECT_EQ(scored(exact, set,
                   {{0, "<answer>5</answer>"},
                    {0, "<answer>5.0</answer>"},
                    {1,
                     "<answer> 1,000.5 "
                     "</answer>"}}),
            (std::vector<double>{1, 0, 1}));
}

TEST(AnswerReward, PromptsWithoutAUsableFieldAreRefusedBeforeARun) {
  const auto set = parse_prompt_set(
                       "{\"prompt\": \"a\", \"answer\": 5}\n{\"prompt\": \"b\", \"answer\": "
                       "\"five\"}\n{\"prompt\": \"c\"}",
                       "p.jsonl")
                       .value_or_throw();
  auto numeric = AnswerReward::create({}).value_or_throw();
  auto s = numeric.check(set);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("p.jsonl:2: the field 'answer' (\"five\") is not a number"),
            std::string::npos)
      << s.error().message;
  auto exact = AnswerReward::create({.match = AnswerMatch::kExact}).value_or_throw();
  auto e = exact.check(set);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("p.jsonl:3: no field 'answer'"), std::string::npos);
  EXPECT_FALSE(AnswerReward::create({.tolerance = -1}).ok());
  EXPECT_FALSE(AnswerReward::create({.field = ""}).ok());
  EXPECT_FALSE(parse_answer_extraction("first_number").ok());
}

TEST(RegexReward, ScoresTheFormatAndRefusesABadExpression) {
  const auto set = two_prompts();
  auto format =
      RegexReward::create("^<think>.*?</think>\\s*<answer>.*?</answer>$").value_or_throw();
  EXPECT_EQ(scored(format, set,
                   {{0, "<think>a</think> <answer>5</answer>"},
                    {0, "<think>a\nb</think><answer>5</answer>"},  // '.' stops at a newline
                    {0, "<answer>5</answer>"},
                    {0, "<think>x</think><answer>5</answer> trailing"}}),
            (std::vector<double>{1, 0, 0, 0}));
  auto dotall =
      RegexReward::create("(?s)^<think>.*?</think><answer>\\p{N}+</answer>$").value_or_throw();
  EXPECT_EQ(scored(dotall, set, {{0, "<think>a\nb</think><answer>\xD9\xA5</answer>"}}),
            (std::vector<double>{1}));  // Arabic-Indic five is a \p{N}
  auto empty = RegexReward::create("^$").value_or_throw();
  EXPECT_EQ(scored(empty, set, {{0, ""}, {0, "x"}}), (std::vector<double>{1, 0}));
  auto bad = RegexReward::create("<answer>(");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("the reward's regular expression '<answer>(' does not "
                                     "compile at offset 9"),
            std::string::npos)
      << bad.error().message;
}

TEST(WeightedReward, SumsItsPartsAndFailsWhereAPartFails) {
  const auto set = two_prompts();
  auto answer = std::make_shared<AnswerReward>(AnswerReward::create({}).value_or_throw());
  auto format = std::make_shared<RegexReward>(RegexReward::create("^<answer>").value_or_throw());
  auto sum = WeightedReward::create({{answer, 1.0}, {format, 0.25}}).value_or_throw();
  EXPECT_EQ(sum.name(), "1*answer + 0.25*regex");
  EXPECT_EQ(scored(sum, set, {{0, "<answer>5"}, {0, "5"}, {0, "<answer>6"}, {0, "6"}}),
            (std::vector<double>{1.25, 1, 0.25, 0}));
  // A part that fails (a real command that exits 3) fails every total it touched.
  auto crash = std::make_shared<CommandReward>(
      CommandReward::create({.argv = {"sh", "-c", "echo bad >&2; exit 3"}}).value_or_throw());
  auto with_crash = WeightedReward::create({{answer, 1.0}, {crash, 1.0}}).value_or_throw();
  std::vector<RewardSample> samples = {{&set.prompts[0], "5"}};
  const auto s = with_crash.score(samples);
  ASSERT_EQ(s.values.size(), 1u);
  EXPECT_FALSE(s.values[0].has_value());
  EXPECT_NE(s.failure.find("exited with status 3: bad"), std::string::npos) << s.failure;
  EXPECT_FALSE(WeightedReward::create({}).ok());
  EXPECT_FALSE(WeightedReward::create({{answer, std::nan("")}}).ok());
}

TEST(RewardFailures, StopEndsTheRunAndZeroScoresZeroBothCounted) {
  auto answer = AnswerReward::create({}).value_or_throw();
  RewardScores s{{1.0, std::nullopt, 0.5, std::nullopt}, "it timed out"};
  EXPECT_EQ(s.failed(), 2u);
  auto stop = resolve_rewards(answer, s, RewardFailurePolicy::kStop);
  ASSERT_FALSE(stop.ok());
  EXPECT_EQ(stop.error().code, Code::kDataError);
  EXPECT_EQ(stop.error().message,
            "the reward 'answer' failed for 2 of 4 completions: it timed out");
  auto zero = resolve_rewards(answer, s, RewardFailurePolicy::kZero).value_or_throw();
  EXPECT_EQ(zero.values, (std::vector<double>{1.0, 0.0, 0.5, 0.0}));
  EXPECT_EQ(zero.failed, 2u);
  EXPECT_EQ(parse_reward_failure_policy("zero").value(), RewardFailurePolicy::kZero);
  EXPECT_FALSE(parse_reward_failure_policy("ignore").ok());
}

}  // namespace
}  // namespace gpulab::train::rl
