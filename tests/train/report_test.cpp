// The training report speaks each task's language: a language model's of tokens/s, perplexity,
// bits per byte and MFU (no images, no top-5), an image classifier's of images and top-k; and a
// learning rate that decays to 0 gets no axis below zero; a per-step curve of a long run stays a
// chart's worth of points.
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

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A training loss per optimizer step: 100,000 steps draw as at most 400 averaged points and no
// dots (every step's own would make a 10 MB page), 50 steps as 50 points with their dots.
TEST(Report, PerStepCurvesOfLongRunsAreThinned) {
  StepChart long_run{"Training loss per step", {}}, short_run{"Short", {}};
  for (int i = 1; i <= 100000; ++i) long_run.points.emplace_back(i, 5.0 / std::sqrt(i));
  for (int i = 1; i <= 50; ++i) short_run.points.emplace_back(i, 1.0 / i);
  const std::string many = render_report({"llama-tiny on text", {}, {long_run}}, lm_epochs());
  const std::string few = render_report({"llama-tiny on text", {}, {short_run}}, lm_epochs());
  EXPECT_NE(many.find("Training loss per step"), std::string::npos);
  EXPECT_LT(many.size(), 100000u);
  const std::string step_chart = many.substr(0, many.find("</svg>"));
  EXPECT_EQ(count(step_chart, "<circle"), 0u);
  const size_t polyline = step_chart.find("points=\"");
  ASSERT_NE(polyline, std::string::npos);
  const std::string pts =
      step_chart.substr(polyline, step_chart.find('"', polyline + 8) - polyline);
  EXPECT_EQ(count(pts, ","), 400u);  // one comma a point
  EXPECT_EQ(count(few.substr(0, few.find("</svg>")), "<circle"), 50u);
}

}  // namespace
}  // namespace gpulab::train
