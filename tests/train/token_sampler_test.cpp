// TokenSampler against transformers itself: on the same logits and token history, its scores
// equal those of RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper and
// TopPLogitsWarper (the pinned .venv, tests/parity/hf_sampling.py), and its draws equal
// torch.multinomial's with the same seed. Also finished rows and bad settings.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/json.h"
#include "core/subprocess.h"
#include "hf_parity.h"
#include "support/temp_dir.h"
#include "train/token_sampler.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

struct SamplerCase {
  SamplerSettings s;
  uint64_t seed;
};

// Settings that exercise each processor alone and together, greedy with a penalty, and a
// penalty below 1 (which raises seen tokens).
std::vector<SamplerCase> sampler_cases() {
  return {
      {{.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1.3}, 1},
      {{.temperature = 1, .top_k = 0, .top_p = 1, .repetition_penalty = 1}, 2},
      {{.temperature = 0.7, .top_k = 50, .top_p = 1, .repetition_penalty = 1}, 3},
      {{.temperature = 1, .top_k = 0, .top_p = 0.9, .repetition_penalty = 1}, 4},
      {{.temperature = 0.8, .top_k = 40, .top_p = 0.95, .repetition_penalty = 1.2}, 5},
      {{.temperature = 1.5, .top_k = 5, .top_p = 0.5, .repetition_penalty = 0.8}, 6},
      {{.temperature = 0.3, .top_k = 2000, .top_p = 0.1, .repetition_penalty = 2}, 7},
  };
}

// Logits with ties (an exact tie at the top-k and top-p boundaries must be handled the same
// way) and history with repeats and one id past the vocabulary (transformers clamps it away).
std::pair<torch::Tensor, torch::Tensor> sampler_inputs() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(43);
  auto logits = torch::randn({4, 1000}, gen, torch::kFloat) * 3;
  logits.index_put_({0, torch::indexing::Slice(0, 8)}, 2.5);
  logits.index_put_({1, torch::indexing::Slice(100, 140)}, -1.0);
  auto history = torch::randint(0, 1000, {4, 12}, gen, torch::kLong);
  history.index_put_({0, 3}, history[0][2]);
  history.index_put_({2, 5}, 1005);
  return {logits, history};
}

TEST(TokenSampler, ScoresAndDrawsEqualTransformersProcessors) {
  if (testing::hf_python().empty()) FAIL() << testing::reference_missing("transformers");
  gpulab::testing::TempDir dir("sampler");
  const auto [logits, history] = sampler_inputs();
  ASSERT_TRUE(
      write_safetensors(dir.path / "in.safetensors", {{"logits", logits}, {"history", history}})
          .ok());
  constexpr int kDraws = 5;
  Json cases = Json::array();
  for (const auto& c : sampler_cases())
    cases.push_back({{"temperature", c.s.temperature},
                     {"top_k", c.s.top_k},
                     {"top_p", c.s.top_p},
                     {"repetition_penalty", c.s.repetition_penalty},
                     {"seed", c.seed},
                     {"draws", kDraws}});
  auto r = run_process(
      {testing::hf_python(), std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_sampling.py",
       (dir.path / "in.safetensors").string(), (dir.path / "out.safetensors").string(),
       cases.dump()},
      testing::reference_run());
  ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  const auto ref = read_safetensors(dir.path / "out.safetensors").value_or_throw().tensors;
  const auto all = sampler_cases();
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    TokenSampler sampler(all[i].s, all[i].seed);
    const auto ours = sampler.scores(logits, history);
    const auto theirs = ref.at("scores." + std::to_string(i));
    // The same excluded tokens, exactly.
    ASSERT_TRUE(torch::equal(torch::isinf(ours), torch::isinf(theirs)));
    // Both sides run the same libtorch kernels (the wheel gpulab links), so equality is
    // expected; at most one float32 rounding in each of the two arithmetic steps (penalty,
    // temperature) could differ: 2 ulp of the value.
    const auto finite = torch::isfinite(theirs);
    const auto diff = (ours - theirs).abs().masked_select(finite);
    const auto bound = theirs.abs().masked_select(finite) * 2 * std::ldexp(1.0, -23);
    EXPECT_TRUE((diff <= bound).all().item<bool>()) << "worst " << diff.max().item<float>();
    EXPECT_GE(finite.sum().item<int64_t>(), 4);  // each row keeps at least its likeliest token
    if (all[i].s.temperature <= 0) {
      EXPECT_TRUE(torch::equal(sampler.next(logits, history), theirs.argmax(-1)));
      continue;
    }
    const auto draws = ref.at("tokens." + std::to_string(i));
    for (int d = 0; d < kDraws; ++d)
      EXPECT_TRUE(torch::equal(sampler.next(logits, history), draws[d])) << "draw " << d;
  }
}

TEST(TokenSampler, PenaltyMovesSeenTokensDownBothSigns) {
  TokenSampler s({.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 2}, 0);
  const auto logits = torch::tensor({{4.0f, -4.0f, 1.0f, 0.5f}});
  const auto out = s.scores(logits, torch::tensor({{0, 1}}));
  EXPECT_FLOAT_EQ(out[0][0].item<float>(), 2.0f);                         // divided
  EXPECT_FLOAT_EQ(out[0][1].item<float>(), -8.0f);                        // multiplied
  EXPECT_FLOAT_EQ(out[0][2].item<float>(), 1.0f);                         // unseen: unchanged
  EXPECT_EQ(s.next(logits, torch::tensor({{0, 1}})).item<int64_t>(), 0);  // 2 > 1 still
}

TEST(TokenSampler, FinishedRowsGetPadAndEosFinishesRows) {
  TokenSampler s({.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1}, 0);
  const auto logits = torch::tensor({{0.f, 9.f, 1.f}, {5.f, 0.f, 1.f}, {0.f, 0.f, 7.f}});
  auto finished = torch::tensor({false, true, false});
  const auto next = s.next(logits, {}, finished, /*pad_id=*/2);
  EXPECT_TRUE(torch::equal(next, torch::tensor({1, 2, 2}, torch::kLong)));
  TokenSampler::mark_finished(finished, next, /*eos_id=*/1);
  EXPECT_TRUE(torch::equal(finished, torch::tensor({true, true, false})));
}

TEST(TokenSampler, SameSeedSameDrawsOtherSeedOthers) {
  const SamplerSettings set{.temperature = 1, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
  const auto logits = torch::zeros({8, 500});  // uniform: every draw is the generator's
  TokenSampler a(set, 11), b(set, 11), c(set, 12);
  const auto ta = a.next(logits, {}), tb = b.next(logits, {}), tc = c.next(logits, {});
  EXPECT_TRUE(torch::equal(ta, tb));
  // 8 uniform draws from 500 agree by chance with probability 500^-8.
  EXPECT_FALSE(torch::equal(ta, tc));
}

TEST(TokenSampler, BadSettingsNameTheFlag) {
  const auto message = [](SamplerSettings s) {
    auto e = check_sampler_settings(s);
    return e ? e->message : std::string();
  };
  EXPECT_NE(message({.temperature = -1}).find("--temperature"), std::string::npos);
  EXPECT_NE(message({.top_k = -3}).find("--top_k"), std::string::npos);
  EXPECT_NE(message({.top_p = 0}).find("--top_p"), std::string::npos);
  EXPECT_NE(message({.top_p = 1.5}).find("--top_p"), std::string::npos);
  EXPECT_NE(message({.repetition_penalty = 0}).find("--repetition_penalty"), std::string::npos);
  EXPECT_NE(message({.temperature = std::numeric_limits<double>::quiet_NaN()}).find("--temp"),
            std::string::npos);
  EXPECT_EQ(message({}), "");
  EXPECT_THROW(TokenSampler({.top_p = 2}, 0), Exception);
}

}  // namespace
}  // namespace gpulab::train
