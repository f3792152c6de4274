// The final-answer reward: extraction and comparison (see answer_reward.h).
#include "train/rl/answer_reward.h"

#include <fmt/format.h>

#include <cmath>

#include "core/strings.h"

namespace gpulab::train::rl {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool digit_at(std::string_view s, size_t i) {
  return i < s.size() && is_digit(s[i]);
}

// A thousands comma: ',' then exactly three digits.
bool thousands_comma(std::string_view s, size_t i) {
  return i < s.size() && s[i] == ',' && digit_at(s, i + 1) && digit_at(s, i + 2) &&
         digit_at(s, i + 3) && !digit_at(s, i + 4);
}

// The number starting at i (after an optional sign), commas dropped; i moves past it.
std::string read_number(std::string_view s, size_t& i) {
  std::string num;
  while (digit_at(s, i)) {
    num += s[i++];
    if (thousands_comma(s, i)) ++i;
  }
  if (i < s.size() && s[i] == '.' && digit_at(s, i + 1)) {
    num += s[i++];
    while (digit_at(s, i)) num += s[i++];
  }
  return num;
}

std::optional<std::string> last_number(std::string_view s) {
  std::optional<std::string> last;
  size_t i = 0;
  while (i < s.size()) {
    const bool sign =
        s[i] == '-' && (i == 0 || !is_alnum(s[i - 1])) &&
        (digit_at(s, i + 1) || (i + 1 < s.size() && s[i + 1] == '.' && digit_at(s, i + 2)));
    const size_t at = sign ? i + 1 : i;
    if (!digit_at(s, at) && !(s[at] == '.' && digit_at(s, at + 1))) {
      ++i;
      continue;
    }
    i = at;
    last = (sign ? "-" : "") + read_number(s, i);
  }
  return last;
}

// The inside of the last open ... close pair.
std::optional<std::string> last_tagged(std::string_view s, std::string_view open,
                                       std::string_view close) {
  const size_t end = s.rfind(close);
  if (end == std::string_view::npos) return std::nullopt;
  const size_t begin = s.substr(0, end).rfind(open);
  if (begin == std::string_view::npos) return std::nullopt;
  return trim(s.substr(begin + open.size(), end - begin - open.size()));
}

// The inside of the last \boxed{...}, braces balanced; nullopt when it is not closed.
std::optional<std::string> last_boxed(std::string_view s) {
  constexpr std::string_view kOpen = "\\boxed{";
  const size_t begin = s.rfind(kOpen);
  if (begin == std::string_view::npos) return std::nullopt;
  int depth = 1;
  for (size_t i = begin + kOpen.size(); i < s.size(); ++i) {
    depth += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0;
    if (depth == 0) return trim(s.substr(begin + kOpen.size(), i - begin - kOpen.size()));
  }
  return std::nullopt;
}

}  // namespace

Result<AnswerExtraction> parse_answer_extraction(std::string_view name) {
  if (name == "last_number") return AnswerExtraction::kLastNumber;
  if (name == "answer_tag") return AnswerExtraction::kAnswerTag;
  if (name == "boxed") return AnswerExtraction::kBoxed;
  if (name == "whole") return AnswerExtraction::kWhole;
  return Error(Code::kInvalidArgument, fmt::format("unknown answer extraction '{}'", name),
               "use last_number, answer_tag (<answer>…</answer>), boxed (\\boxed{…}) or whole");
}

std::optional<std::string> extract_answer(std::string_view completion, AnswerExtraction how) {
  switch (how) {
    case AnswerExtraction::kLastNumber:
      return last_number(completion);
    case AnswerExtraction::kAnswerTag:
      return last_tagged(completion, "<answer>", "</answer>");
    case AnswerExtraction::kBoxed:
      return last_boxed(completion);
    case AnswerExtraction::kWhole:
      return trim(completion);
  }
  return std::nullopt;
}

std::optional<double> parse_answer_number(std::string_view text) {
  const std::string t = trim(text);
  std::string plain;
  for (size_t i = t.starts_with('+') ? 1 : 0; i < t.size(); ++i)
    if (!(t[i] == ',' && i > 0 && is_digit(t[i - 1]) && thousands_comma(t, i))) plain += t[i];
  const auto v = parse_double(plain);
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return v;
}

}  // namespace gpulab::train::rl

namespace gpulab::train::rl {
namespace {

// The field as the text an exact match compares with: a string trimmed, a number as JSON
// writes it; nullopt for anything else.
std::optional<std::string> field_text(const Json& v) {
  if (v.is_string()) return trim(v.get_ref<const std::string&>());
  if (v.is_number()) return v.dump();
  return std::nullopt;
}

std::optional<double> field_number(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return parse_answer_number(v.get_ref<const std::string&>());
  return std::nullopt;
}

}  // namespace

Result<AnswerReward> AnswerReward::create(AnswerRewardOptions opts) {
  if (opts.field.empty())
    return Error(Code::kInvalidArgument, "the answer reward needs the name of a prompt field",
                 "e.g. answer");
  if (!std::isfinite(opts.tolerance) || opts.tolerance < 0)
    return Error(
        Code::kInvalidArgument,
        fmt::format("the answer tolerance {} is not a finite number >= 0", opts.tolerance));
  return AnswerReward(std::move(opts));
}

Status AnswerReward::check(const PromptSet& set) const {
  const bool numeric = opts_.match == AnswerMatch::kNumeric;
  for (const auto& p : set.prompts) {
    if (!p.fields.contains(opts_.field))
      return Error(Code::kInvalidArgument,
                   fmt::format("{}: no field '{}', which the answer reward compares with",
                               set.where(p), opts_.field),
                   "give every prompt its right answer, or name the field that holds it");
    const Json& v = p.fields[opts_.field];
    if (numeric ? !field_number(v) : !field_text(v))
      return Error(Code::kInvalidArgument,
                   fmt::format("{}: the field '{}' ({}) is not {}", set.where(p), opts_.field,
                               v.dump(), numeric ? "a number" : "a string or a number"),
                   numeric ? "compare it exactly instead" : "");
  }
  return ok_status();
}

double AnswerReward::score_one(const RewardSample& s) const {
  const Json* v =
      s.prompt && s.prompt->fields.contains(opts_.field) ? &s.prompt->fields[opts_.field] : nullptr;
  const auto got = extract_answer(s.completion, opts_.extraction);
  if (!v || !got) return 0.0;
  if (opts_.match == AnswerMatch::kExact) {
    const auto want = field_text(*v);
    return want && *want == *got ? 1.0 : 0.0;
  }
  const auto want = field_number(*v);
  const auto have = parse_answer_number(*got);
  return want && have && std::abs(*have - *want) <= opts_.tolerance ? 1.0 : 0.0;
}

RewardScores AnswerReward::score(std::span<const RewardSample> samples) const {
  RewardScores out;
  for (const auto& s : samples) out.values.emplace_back(score_one(s));
  return out;
}

}  // namespace gpulab::train::rl
