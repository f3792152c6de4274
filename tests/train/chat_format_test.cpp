// gpulab's built-in chat formats against the models' own chat templates rendered by transformers'
// apply_chat_template (tests/parity/chat_template_reference.py): ChatML and Llama 3, with and
// without the generation prompt, on contents with surrounding whitespace of every kind Jinja's
// trim removes, several turns and roles, non-ASCII text and an empty message.
#include <gtest/gtest.h>

#include "core/json.h"
#include "core/subprocess.h"
#include "train/data/chat_format.h"
#include "train/torchvision_python.h"

namespace gpulab::train {
namespace {

TEST(ChatFormat, RendersAsTheModelsTemplatesDo) {
  const std::string py = testing::python_with("transformers, jinja2");
  ASSERT_FALSE(py.empty()) << testing::reference_missing("transformers, jinja2");
  const std::vector<std::vector<ChatMessage>> conversations = {
      {{"user", "What is 2+3?"}},
      {{"system", "  You are terse.\n"}, {"user", "\t\xE3\x80\x80Hi\xC2\xA0 \x1f"}},
      {{"system", "s"},
       {"user", "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\n\n"},
       {"assistant", "<think>ok</think> 5"},
       {"user", ""},
       {"tool", " {\"a\": 1} "}},
  };
  Json cases = Json::array();
  std::vector<std::string> ours;
  for (const char* name : {"chatml", "llama3"})
    for (const auto& conv : conversations)
      for (bool gen : {false, true}) {
        Json msgs = Json::array();
        for (const auto& m : conv) msgs.push_back({{"role", m.role}, {"content", m.content}});
        cases.push_back({{"format", name}, {"messages", msgs}, {"add_generation_prompt", gen}});
        ours.push_back(render_chat(parse_chat_format(name).value_or_throw(), conv, gen));
      }
  RunOptions o = testing::reference_run();  // transformers' import alone can take a minute
  o.stdin_data = cases.dump();
  auto r = run_process(
      {py, std::string(GPULAB_SOURCE_DIR) + "/tests/parity/chat_template_reference.py"}, o);
  ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  const auto theirs = parse_json(r->out).value_or_throw().get<std::vector<std::string>>();
  ASSERT_EQ(theirs.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_EQ(ours[i], theirs[i]) << "case " << i << ": " << cases[i].dump();
}

TEST(ChatFormat, UnknownFormatsAreRefusedNamingTheKnownOnes) {
  auto r = parse_chat_format("alpaca");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_NE(r.error().hint.find("chatml"), std::string::npos);
  EXPECT_NE(r.error().hint.find("llama3"), std::string::npos);
}

}  // namespace
}  // namespace gpulab::train
