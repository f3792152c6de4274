// The GRPO loss against TRL GRPOTrainer's, transcribed into PyTorch
// (tests/parity/grpo_loss_reference.py): for one batch of ragged completions in three groups (one
// whose rewards are all equal), the loss, its gradient in the logits, the advantages, the KL and
// the clip fractions of each variant (grpo, dapo, dr_grpo), with and without the old policy's
// log-probabilities (μ > 1 or 1), KL or not, std scaling or not, importance sampling against the
// sampler's log-probabilities in each of TRL's four modes, all in fp64. Also bad options.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/json.h"
#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "train/rl/grpo_advantages.h"
#include "train/rl/grpo_loss.h"
#include "train/torchvision_python.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::rl {
namespace {

constexpr int64_t kGroup = 4, kRows = 12, kLen = 6, kVocab = 11;

struct LossCase {
  GrpoLossOptions opts;
  bool scale_rewards, use_old;
  double temperature;
};

std::vector<LossCase> loss_cases() {
  using T = GrpoLossType;
  using M = ImportanceMode;
  return {
      {{T::kGrpo, 0.2, 0.28, 0.04, 0}, true, true, 0.7},
      {{T::kDapo, 0.2, 0.28, 0.04, 0}, true, true, 0.7},
      {{T::kDrGrpo, 0.2, 0.28, 0.04, 8}, false, true, 0.7},
      {{T::kGrpo, 0.2, 0.2, 0.0, 0}, true, false, 1.0},  // μ = 1: ratio 1, no KL
      {{T::kDapo, 0.1, 0.5, 0.0, 0}, true, true, 1.0},
      {{T::kDrGrpo, 0.2, 0.28, 0.1, 6}, true, false, 1.3},
      // Importance sampling against the sampler's log-probabilities, each mode, bounds that bite.
      {{T::kDapo, 0.2, 0.28, 0.04, 0, {M::kTokenTruncate, 0.0, 1.25}}, true, true, 0.7},
      {{T::kGrpo, 0.2, 0.28, 0.0, 0, {M::kTokenMask, 0.8, 1.25}}, true, false, 1.0},
      {{T::kDrGrpo, 0.2, 0.28, 0.04, 8, {M::kSequenceTruncate, 0.5, 2.0}}, false, true, 0.7},
      {{T::kDapo, 0.2, 0.28, 0.0, 0, {M::kSequenceMask, 0.0, 1.5}}, true, false, 1.0},
  };
}

// Logits; sampled tokens; ragged lengths (one row empty); an old policy and a reference some
// distance away, so that ratios fall outside both clip bounds; rewards in three groups of 4 (the
// middle one all equal).
StateDict loss_inputs() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2026);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const auto logits = torch::randn({kRows, kLen, kVocab}, gen, f64) * 2;
  const auto tokens = torch::randint(0, kVocab, {kRows, kLen}, gen, torch::kLong);
  const auto lengths = torch::tensor({6, 3, 1, 5, 6, 2, 4, 6, 0, 5, 6, 1}, torch::kLong);
  const auto mask = (torch::arange(kLen).unsqueeze(0) < lengths.unsqueeze(1)).to(torch::kFloat64);
  const auto lp = token_log_probs(logits, tokens, 1.0);
  const auto old = lp + torch::randn({kRows, kLen}, gen, f64) * 0.3;
  const auto ref = lp + torch::randn({kRows, kLen}, gen, f64) * 0.5;
  const auto sampling = lp + torch::randn({kRows, kLen}, gen, f64) * 0.3;
  const auto rewards =
      torch::tensor({1.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, -2.0, 0.25, 3.0, 0.0}, f64);
  return {{"logits", logits}, {"tokens", tokens},   {"mask", mask},        {"old", old},
          {"ref", ref},       {"rewards", rewards}, {"sampling", sampling}};
}

Json case_json(const LossCase& c) {
  return {{"type", grpo_loss_type_name(c.opts.type)},
          {"epsilon_low", c.opts.epsilon_low},
          {"epsilon_high", c.opts.epsilon_high},
          {"beta", c.opts.beta},
          {"max_completion_length", c.opts.max_completion_length},
          {"group_size", kGroup},
          {"scale_rewards", c.scale_rewards},
          {"use_old", c.use_old},
          {"temperature", c.temperature},
          {"is_mode", importance_mode_name(c.opts.importance.mode)},
          {"is_min", c.opts.importance.min},
          {"is_max", c.opts.importance.max}};
}

// Ours for one case: what the reference writes, under the same names.
StateDict ours(const StateDict& in, const LossCase& c) {
  const auto logits = in.at("logits").clone().requires_grad_(true);
  const auto adv = group_advantages(in.at("rewards"), kGroup, c.scale_rewards);
  const auto r = grpo_loss({.log_probs = token_log_probs(logits, in.at("tokens"), c.temperature),
                            .old_log_probs = c.use_old ? in.at("old") : torch::Tensor(),
                            .ref_log_probs = in.at("ref"),
                            .advantages = adv,
                            .mask = in.at("mask"),
                            .sampling_log_probs = in.at("sampling")},
                           c.opts);
  r.loss.backward();
  const auto or_zero = [](const torch::Tensor& t) {
    return t.defined() ? t : torch::zeros({}, torch::kFloat64);
  };
  return {{"loss", r.loss.detach()},
          {"grad", logits.grad()},
          {"advantages", adv},
          {"kl", or_zero(r.kl)},
          {"clip_low", r.clip_low},
          {"clip_high", r.clip_high},
          {"is_mean", or_zero(r.importance_mean)},
          {"is_capped", or_zero(r.importance_capped)}};
}

// Tolerance: both sides run in fp64 (unit roundoff u = 2^-53 ≈ 1.1e-16) and differ only in the
// order of their floating-point operations (the logsumexp over V = 11, the masked sums over
// N·T = 72 tokens, the group mean and std, the reference's stacked logsumexp). A sum of n terms
// is off by at most about n·u·Σ|terms| (Higham's γ_n); the largest here is 72 terms of
// |ratio·A + β·KL| ≲ 10, so any result is within 72 · 1.1e-16 · 720 ≈ 6e-12 of the other's,
// and a gradient entry, a product of a few such factors, within a small multiple of that.
// 1e-10 leaves more than 10x of margin; a wrong formula is off by far more (the variants differ
// from one another by O(0.1)).
constexpr double kTolerance = 1e-10;

TEST(GrpoLoss, LossAndGradientsEqualTrlsForEachVariant) {
  const std::string py = testing::torch_python();
  ASSERT_FALSE(py.empty()) << testing::reference_missing("torch, numpy");
  gpulab::testing::TempDir dir("grpo-loss");
  const auto in = loss_inputs();
  ASSERT_TRUE(write_safetensors(dir.path / "in.safetensors", in).ok());
  Json cases = Json::array();
  for (const auto& c : loss_cases()) cases.push_back(case_json(c));
  auto r = run_process({py, std::string(GPULAB_SOURCE_DIR) + "/tests/parity/grpo_loss_reference.py",
                        (dir.path / "in.safetensors").string(),
                        (dir.path / "out.safetensors").string(), cases.dump()},
                       testing::reference_run());
  ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  const auto ref = read_safetensors(dir.path / "out.safetensors").value_or_throw().tensors;
  double clip_low = 0, clip_high = 0, worst = 0, capped_least = 1, capped_most = 0;
  std::vector<double> losses;
  for (size_t i = 0; i < loss_cases().size(); ++i) {
    SCOPED_TRACE("case " + cases[i].dump());
    const auto mine = ours(in, loss_cases()[i]);
    for (const auto& [name, t] : mine) {
      const auto& theirs = ref.at(name + "." + std::to_string(i));
      ASSERT_EQ(t.sizes(), theirs.sizes()) << name;
      ASSERT_EQ(t.scalar_type(), torch::kFloat64) << name;
      const double diff = (t - theirs).abs().max().item<double>();
      EXPECT_LE(diff, kTolerance) << name << " differs by " << diff;
      worst = std::max(worst, diff);
    }
    EXPECT_GT(mine.at("grad").abs().max().item<double>(), 1e-3);  // a gradient that can differ
    clip_low = std::max(clip_low, mine.at("clip_low").item<double>());
    clip_high = std::max(clip_high, mine.at("clip_high").item<double>());
    losses.push_back(mine.at("loss").item<double>());
    if (loss_cases()[i].opts.importance.mode != ImportanceMode::kOff) {
      capped_least = std::min(capped_least, mine.at("is_capped").item<double>());
      capped_most = std::max(capped_most, mine.at("is_capped").item<double>());
    }
  }
  std::printf("largest difference from the reference over %zu cases: %.3g\n", loss_cases().size(),
              worst);
  // The batch exercises both clip bounds, and the variants give different losses.
  EXPECT_GT(clip_low, 0.0);
  EXPECT_GT(clip_high, 0.0);
  EXPECT_GT(std::abs(losses[0] - losses[1]), 1e-3);
  EXPECT_GT(std::abs(losses[1] - losses[2]), 1e-3);
  // Every importance case's bounds changed some weights and kept others.
  EXPECT_GT(capped_least, 0.0);
  EXPECT_LT(capped_most, 1.0);
}

TEST(GrpoLoss, AGroupWithEqualRewardsHasZeroAdvantage) {
  const auto rewards = torch::tensor({3.0, 3.0, 1.0, 2.0}, torch::kFloat64);
  const auto a = group_advantages(rewards, 2, /*scale_by_std=*/true);
  EXPECT_EQ(a[0].item<double>(), 0.0);
  EXPECT_EQ(a[1].item<double>(), 0.0);
  EXPECT_THROW(group_advantages(rewards, 3, true), Exception);
  EXPECT_THROW(group_advantages(rewards, 1, true), Exception);
  EXPECT_THROW(group_advantages(torch::tensor({1, 0}, torch::kLong), 2, true), Exception);
}

TEST(GrpoLoss, BadOptionsAndShapesAreRefused) {
  for (const GrpoLossOptions& o :
       {GrpoLossOptions{.epsilon_low = 1.0}, GrpoLossOptions{.epsilon_low = -0.1},
        GrpoLossOptions{.epsilon_high = std::nan("")}, GrpoLossOptions{.beta = -1},
        GrpoLossOptions{.type = GrpoLossType::kDrGrpo},
        GrpoLossOptions{.importance = {ImportanceMode::kTokenMask, -1, 3}},
        GrpoLossOptions{.importance = {ImportanceMode::kTokenMask, 2, 2}},
        GrpoLossOptions{.importance = {ImportanceMode::kSequenceMask, 0, INFINITY}}})
    EXPECT_FALSE(check_grpo_loss_options(o).ok());
  EXPECT_FALSE(parse_importance_mode("tis").ok());
  EXPECT_EQ(parse_importance_mode("sequence_mask").value(), ImportanceMode::kSequenceMask);
  EXPECT_TRUE(check_grpo_loss_options({}).ok());
  EXPECT_FALSE(parse_grpo_loss_type("ppo").ok());
  EXPECT_EQ(parse_grpo_loss_type("dr_grpo").value(), GrpoLossType::kDrGrpo);
  const auto lp = torch::zeros({2, 3}, torch::kFloat64);
  const GrpoLossInputs good{.log_probs = lp,
                            .advantages = torch::zeros({2}, torch::kFloat64),
                            .mask = torch::ones({2, 3})};
  EXPECT_NO_THROW(grpo_loss(good, {}));
  auto bad_mask = good;
  bad_mask.mask = torch::ones({2, 4});
  EXPECT_THROW(grpo_loss(bad_mask, {}), Exception);
  EXPECT_THROW(grpo_loss(good, {.beta = 0.04}), Exception);  // no reference log-probs
  // Importance sampling without the sampler's log-probabilities.
  EXPECT_THROW(grpo_loss(good, {.importance = {ImportanceMode::kTokenTruncate, 0, 3}}), Exception);
  EXPECT_THROW(grpo_loss(good, {.type = GrpoLossType::kDrGrpo, .max_completion_length = 2}),
               Exception);
  EXPECT_THROW(token_log_probs(torch::zeros({2, 3, 4}), torch::zeros({2, 2}, torch::kLong)),
               Exception);
  EXPECT_THROW(token_log_probs(torch::zeros({1, 2, 4}), torch::tensor({{0, 4}}, torch::kLong)),
               Exception);
}

}  // namespace
}  // namespace gpulab::train::rl
