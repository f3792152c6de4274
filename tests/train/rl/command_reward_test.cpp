// The external-command reward with real processes (scripts the test writes): a Python scorer that
// reads the JSONL request and answers one number per line; and every way a command can go wrong —
// a crash, a non-zero exit, a hang past the timeout, garbage on a line, too few lines, a command
// that never reads its input, a program that is not there — each a counted failure, never a crash.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "core/json.h"
#include "core/strings.h"
#include "support/temp_dir.h"
#include "train/rl/command_reward.h"
#include "train/torchvision_python.h"

namespace gpulab::train::rl {
namespace {

struct Scripts {
  gpulab::testing::TempDir dir{"reward-cmd"};
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir.path / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0755);
    return path.string();
  }
};

PromptSet prompts() {
  return parse_prompt_set(
             "{\"prompt\": \"2+3=\", \"answer\": 5}\n"
             R"({"prompt": [{"role": "user", "content": "say hi"}], "answer": 2, "k": [1]})",
             "p.jsonl")
      .value_or_throw();
}

std::vector<RewardSample> samples(const PromptSet& set, const std::vector<std::string>& texts) {
  std::vector<RewardSample> out;
  for (size_t i = 0; i < texts.size(); ++i) out.push_back({&set.prompts[i % 2], texts[i]});
  return out;
}
// The samples view the texts: a temporary list would leave them dangling.
std::vector<RewardSample> samples(const PromptSet& set, std::vector<std::string>&& texts) = delete;

// A scorer in Python: the completion's length times the prompt's answer, plus 0.5 for a chat
// prompt. Proves the request carries the prompt as given, the completion and the fields.
constexpr const char* kScorer = R"(import json, sys
for line in sys.stdin:
    r = json.loads(line)
    chat = isinstance(r["prompt"], list)
    print(len(r["completion"]) * r["fields"]["answer"] + (0.5 if chat else 0))
)";

TEST(CommandReward, ScoresEachCompletionFromTheCommandsLines) {
  const std::string py = testing::python_with("json");
  ASSERT_FALSE(py.empty()) << testing::reference_missing("json");
  Scripts s;
  const auto set = prompts();
  auto r = CommandReward::create({.argv = {py, s.write("score.py", kScorer)}}).value_or_throw();
  ASSERT_TRUE(r.check(set).ok());
  const std::vector<std::string> texts = {"abc", "hello", "", "\xE4\xB8\xAD", "x\n\"y\"\xFF"};
  const auto got = r.score(samples(set, texts));
  ASSERT_EQ(got.failed(), 0u) << got.failure;
  // 3*5, 5*2+.5, 0*5, 1*2+.5 (one character), 6*5 (the invalid byte became one U+FFFD).
  const std::vector<double> want = {15, 10.5, 0, 2.5, 30};
  ASSERT_EQ(got.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.values[i], want[i]) << i;
}

TEST(CommandReward, EveryFailureIsCountedNeverACrash) {
  Scripts s;
  const auto set = prompts();
  const std::vector<std::string> abc = {"a", "b", "c"};
  const auto three = samples(set, abc);
  struct Case {
    std::string script, why;
    size_t failed;
  };
  const std::vector<Case> cases = {
      {"kill -SEGV $$", "killed by SIGSEGV", 3},
      {"cat >/dev/null; echo 'no model here' >&2; exit 2", "exited with status 2: no model here",
       3},
      {"printf '1\\nabc\\n0.5\\n'", "line 2 ('abc') is not a finite number", 1},
      {"printf '1\\nnan\\ninf\\n'", "line 2 ('nan') is not a finite number", 2},
      {"printf '1\\n2\\n'", "it printed 2 lines for 3 completions", 3},
      {"exec 0<&-; printf '1\\n2\\n3\\n'", "", 0},  // never reads its input: fine
      {"printf ' 1 \\r\\n-2e-1\\n3.0\\n'", "", 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.script);
    auto r = CommandReward::create({.argv = {"sh", s.write("r.sh", c.script)}}).value_or_throw();
    const auto got = r.score(three);
    ASSERT_EQ(got.values.size(), 3u);
    EXPECT_EQ(got.failed(), c.failed);
    EXPECT_NE(got.failure.find(c.why), std::string::npos) << got.failure;
  }
}

TEST(CommandReward, AHungCommandIsKilledAtTheTimeout) {
  Scripts s;
  const auto set = prompts();
  // It reads nothing and sleeps in a child: the whole process group is killed.
  auto r = CommandReward::create({.argv = {"sh", s.write("hang.sh", "sleep 30; echo 1")},
                                  .timeout = std::chrono::milliseconds(300)})
               .value_or_throw();
  const std::vector<std::string> big(200, std::string(4096, 'x'));  // beyond a pipe's buffer
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = r.score(samples(set, big));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(got.failed(), 200u);
  EXPECT_EQ(got.failure, "it did not finish within 300 ms (killed)");
  auto stop = resolve_rewards(r, got, RewardFailurePolicy::kStop);
  ASSERT_FALSE(stop.ok());
  EXPECT_NE(stop.error().message.find("failed for 200 of 200 completions"), std::string::npos);
}

TEST(CommandReward, AProgramThatIsNotThereIsRefusedBeforeARunAndFailsIfRunAnyway) {
  const auto set = prompts();
  auto r = CommandReward::create({.argv = {"/no/such/scorer"}}).value_or_throw();
  auto c = r.check(set);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, Code::kNotFound);
  EXPECT_NE(c.error().message.find("'/no/such/scorer'"), std::string::npos);
  const std::vector<std::string> a = {"a"};
  const auto got = r.score(samples(set, a));
  EXPECT_EQ(got.failed(), 1u);
  EXPECT_NE(got.failure.find("cannot run /no/such/scorer"), std::string::npos) << got.failure;
  EXPECT_FALSE(CommandReward::create({.argv = {"gpulab-no-such-scorer"}})->check(set).ok());
  EXPECT_TRUE(CommandReward::create({.argv = {"sh"}})->check(set).ok());
  EXPECT_FALSE(CommandReward::create({}).ok());
  EXPECT_FALSE(
      CommandReward::create({.argv = {"sh"}, .timeout = std::chrono::milliseconds(0)}).ok());
}

}  // namespace
}  // namespace gpulab::train::rl
