// The flags a resumed run must keep (train/resume_check.h): each meaning-changing flag is named
// with both values and the way to a new run; harmless ones pass; epochs only matter for cosine.
#include <gtest/gtest.h>

#include "train/resume_check.h"

namespace gpulab::train {
namespace {

Json options() {
  return {{"model", "llama-tiny"}, {"dataset", "text"},     {"data_dir", "/d"},
          {"seq_len", 64},         {"batch_size", 8},       {"grad_accum", 1},
          {"precision", "fp32"},   {"input_size", 32},      {"subset", 0},
          {"optimizer", "adamw"},  {"lr_schedule", "step"}, {"num_epochs", 2},
          {"threads", 2},          {"log_every", 1}};
}

TEST(ResumeCheck, EachMeaningFlagIsNamed) {
  const Json saved = options();
  const std::pair<const char*, Json> changes[] = {
      {"model", "gpt2-tiny"},   {"dataset", "synthetic-text"},
      {"data_dir", "/e"},       {"seq_len", 32},
      {"batch_size", 4},        {"grad_accum", 2},
      {"precision", "bf16"},    {"input_size", 64},
      {"subset", 100},          {"optimizer", "sgd"},
      {"lr_schedule", "cosine"}};
  for (const auto& [flag, value] : changes) {
    Json now = saved;
    now[flag] = value;
    auto st = check_resume_options(saved, now, "ckpt.pt");
    ASSERT_FALSE(st.ok()) << flag;
    EXPECT_EQ(st.error().code, Code::kInvalidArgument);
    EXPECT_NE(st.error().message.find(std::string("--") + flag), std::string::npos)
        << st.error().message;
    EXPECT_NE(st.error().message.find("ckpt.pt"), std::string::npos) << st.error().message;
    EXPECT_NE(st.error().hint.find("--output_dir"), std::string::npos) << st.error().hint;
  }
}

TEST(ResumeCheck, HarmlessFlagsAndOlderCheckpointsPass) {
  Json now = options();
  now["threads"] = 8;
  now["log_every"] = 3;
  now["num_epochs"] = 4;  // a step schedule continues exactly as a longer run
  EXPECT_TRUE(check_resume_options(options(), now, "c").ok());
  Json old = options();
  old.erase("seq_len");  // a checkpoint from before the field: not compared
  now["seq_len"] = 128;
  EXPECT_TRUE(check_resume_options(old, now, "c").ok());
}

TEST(ResumeCheck, MoreEpochsOfACosineRunAreRefused) {
  Json saved = options();
  saved["lr_schedule"] = "cosine";
  Json now = saved;
  now["num_epochs"] = 3;
  auto st = check_resume_options(saved, now, "c");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("--num_epochs 3"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("cosine"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().hint.find("--init_weights"), std::string::npos) << st.error().hint;
}

}  // namespace
}  // namespace gpulab::train
