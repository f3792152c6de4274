// The training report speaks each task's language: a language model's of tokens/s, perplexity,
// bits per byte and MFU (no images, no top-5), an image classifier's of images and top-k; and a
// learning rate that decays to 0 gets no axis below zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "train/report.h"

namespace gpulab::train {
namespace {

std::vector<EpochRecord> lm_epochs() {
  std::vector<EpochRecord> out;
  for (int i = 1; i <= 3; ++i) {
    EpochRecord e;
    e.epoch = i;
    e.num_epochs = 3;
    e.train_loss = 4.0 / i;
    e.test_loss = 4.2 / i;
    e.test_top1 = 0.1 * i;
    e.lr = i == 3 ? 0.0 : 1e-3 / i;  // a cosine schedule's end
    EpochRecord::Lm lm;
    lm.tokens_per_s = 1000;
    lm.mfu = 0.25;
    lm.val_bits_per_byte = 1.5 / i;
    e.lm = lm;
    out.push_back(e);
  }
  return out;
}

TEST(Report, LanguageModelWords) {
  const std::string html = render_report({"llama-tiny on text", {}}, lm_epochs());
  for (const char* word : {"tokens/s", "perplexity", "bits per byte", "MFU", "next-token acc"})
    EXPECT_NE(html.find(word), std::string::npos) << word;
  for (const char* word : {"images/s", "top-5", "top-1"})
    EXPECT_EQ(html.find(word), std::string::npos) << word;
  // The learning-rate axis (0 .. 1e-3) has no negative tick.
  EXPECT_EQ(html.find("text-anchor=\"end\">-"), std::string::npos);
  const auto facts = best_result_facts(lm_epochs());
  ASSERT_FALSE(facts.empty());
  EXPECT_EQ(facts[0].first, "best validation loss");
  char ppl[32];  // the best epoch is the 3rd: loss 4.2 / 3
  std::snprintf(ppl, sizeof ppl, "perplexity %.2f, epoch 3", std::exp(4.2 / 3));
  EXPECT_NE(facts[0].second.find(ppl), std::string::npos) << facts[0].second;
}

TEST(Report, ImageClassifierWords) {
  std::vector<EpochRecord> epochs(2);
  for (int i = 0; i < 2; ++i) {
    epochs[i].epoch = i + 1;
    epochs[i].images_per_s = 100;
    epochs[i].test_loss = 1.0;
    epochs[i].test_top1 = 0.5 + 0.1 * i;
    epochs[i].test_top5 = 0.9;
  }
  const std::string html = render_report({"resnet18 on cifar10", {}}, epochs);
  for (const char* word : {"images/s", "test top-1", "test top-5"})
    EXPECT_NE(html.find(word), std::string::npos) << word;
  EXPECT_EQ(html.find("perplexity"), std::string::npos);
  const auto facts = best_result_facts(epochs);
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0], (std::pair<std::string, std::string>{"best test top-1", "0.6000"}));
}

}  // namespace
}  // namespace gpulab::train
