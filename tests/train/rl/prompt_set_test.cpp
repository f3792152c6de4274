// GRPO prompt files: text and chat prompts with their fields kept, line numbers through blank
// lines, CRLF and a byte-order mark; every malformed line refused naming the file and line; an
// empty set, a missing file and a folder refused; chat prompts rendered with the built-in formats.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "support/temp_dir.h"
#include "train/rl/prompt_set.h"

namespace gpulab::train::rl {
namespace {

TEST(PromptSet, ReadsTextAndChatPromptsKeepingTheirFields) {
  gpulab::testing::TempDir dir("prompts");
  const auto path = dir.path / "p.jsonl";
  std::ofstream(path) << "\xEF\xBB\xBF{\"prompt\": \"2+3=\", \"answer\": 5}\r\n"
                      << "\n   \n"
                      << R"({"prompt": [{"role": "system", "content": "Be terse."},)"
                      << R"( {"role": "user", "content": "1+1?"}], "answer": "2", "tests": [1, 2]})"
                      << "\n";
  auto set = read_prompt_set(path);
  ASSERT_TRUE(set.ok()) << set.error().to_string();
  ASSERT_EQ(set->prompts.size(), 2u);
  const auto& a = set->prompts[0];
  EXPECT_FALSE(a.is_chat());
  EXPECT_EQ(a.text, "2+3=");
  EXPECT_EQ(a.line, 1u);
  EXPECT_EQ(a.fields, Json({{"answer", 5}}));
  const auto& b = set->prompts[1];
  ASSERT_TRUE(b.is_chat());
  EXPECT_EQ(b.line, 4u);
  EXPECT_EQ(b.messages[1].role, "user");
  EXPECT_EQ(b.messages[1].content, "1+1?");
  EXPECT_EQ(b.fields, Json({{"answer", "2"}, {"tests", {1, 2}}}));
  EXPECT_EQ(set->where(b), path.string() + ":4");
  EXPECT_TRUE(b.prompt.is_array());  // as the file gave it, for the reward command
}

TEST(PromptSet, MalformedLinesAreRefusedNamingFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "ok")", "malformed"},
      {R"(["prompt", "x"])", "not a JSON object"},
      {R"({"question": "x"})", "no `prompt`"},
      {R"({"prompt": 7})", "neither a string nor a list"},
      {R"({"prompt": ""})", "`prompt` is empty"},
      {R"({"prompt": []})", "empty list of messages"},
      {R"({"prompt": [{"role": "user"}]})", "message 1"},
      {R"({"prompt": [{"role": "user", "content": "a"}, {"role": 1, "content": "b"}]})",
       "message 2"},
      {"{\"prompt\": \"\xFF\xFE\"}", "malformed"},  // not UTF-8
  };
  for (const auto& [line, what] : cases) {
    SCOPED_TRACE(line);
    auto set = parse_prompt_set("{\"prompt\": \"fine\"}\n\n" + line + "\n", "train.jsonl");
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.error().code, Code::kInvalidArgument);
    EXPECT_NE(set.error().message.find("train.jsonl:3: "), std::string::npos)
        << set.error().message;
    EXPECT_NE(set.error().message.find(what), std::string::npos) << set.error().message;
    EXPECT_FALSE(set.error().hint.empty());
  }
}

TEST(PromptSet, EmptySetsMissingFilesAndFoldersAreRefused) {
  for (const char* text : {"", "\n\n  \r\n", "\xEF\xBB\xBF"}) {
    auto set = parse_prompt_set(text, "empty.jsonl");
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.error().message, "empty.jsonl holds no prompt");
  }
  gpulab::testing::TempDir dir("prompts");
  auto missing = read_prompt_set(dir.path / "none.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Code::kNotFound);
  auto folder = read_prompt_set(dir.path);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.error().message.find("folder"), std::string::npos);
}

// Random bytes and random JSON-ish lines: an answer or an error, never a crash or an exception.
TEST(PromptSet, NoInputCrashesTheReader) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":,prompt rolecontent\\u0000\xC3\xA9\xFF\n\r 0123-e.";
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 80);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    EXPECT_NO_THROW({ (void)parse_prompt_set(text, "fuzz.jsonl"); });
  }
}

TEST(PromptSet, ChatPromptsRenderInTheGivenFormatAndNeedOne) {
  auto set = parse_prompt_set(
      "{\"prompt\": \"plain\"}\n"
      R"({"prompt": [{"role": "user", "content": "Hi"}]})",
      "c.jsonl");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(prompt_text(*set, set->prompts[0], std::nullopt).value(), "plain");
  EXPECT_EQ(prompt_text(*set, set->prompts[1], ChatFormat::kChatMl).value(),
            render_chat(ChatFormat::kChatMl, {{"user", "Hi"}}, true));
  EXPECT_EQ(prompt_text(*set, set->prompts[1], ChatFormat::kLlama3).value(),
            render_chat(ChatFormat::kLlama3, {{"user", "Hi"}}, true));
  auto none = prompt_text(*set, set->prompts[1], std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("c.jsonl:2"), std::string::npos);
}

}  // namespace
}  // namespace gpulab::train::rl
