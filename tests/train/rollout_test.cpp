// Batched rollouts (train/rollout.h): prompts of lengths 1, 5 and 17 continued together, left-
// padded, give each row what the prompt gives alone (greedy tokens equal generate_rows', logits
// within fp32's own rounding), for Llama (rotary positions, grouped-query) and GPT-2 (a position
// table); rows that finish leave the batch and its cache without changing the others; a seed fixes
// a sampled run; recorded log-probabilities equal a full forward's; bad prompts are named before
// any forward pass; transformers' generate() with
// left padding chooses the same tokens; and `gpulab generate` with several prompts batches them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "support/tensor_diff.h"
#include "train/hf_parity.h"
#include "train/rollout.h"
#include "train/token_log_probs.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

// Small shapes of each family; Llama with grouped-query attention (6 heads over 2).
DecoderConfig rollout_shape(const std::string& family) {
  DecoderConfig c;
  c.family = family;
  c.name = family + "-rollout";
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 200;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = family == "llama" ? 2 : 6;
  c.max_positions = 64;
  c.tie_word_embeddings = false;
  return c;
}

// Weights spread wider than the families' 0.02 (as the parity tests' initializer_range 0.2), so
// that the next-token logits are far apart and greedy choices are not near ties.
CausalLmPtr rollout_model(const std::string& family) {
  torch::manual_seed(11);
  auto m = build_causal_lm(rollout_shape(family));
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters())
    if (p.dim() >= 2) p.normal_(0.0, 0.2);
  return m;
}

// The model under test, watched: each forward pass's rows, the cache's width before it and the
// logits of its last position (what generation draws from).
class Watched : public CausalLm {
 public:
  explicit Watched(CausalLmPtr inner)
      : CausalLm(inner->config()), inner_(register_module("inner", std::move(inner))) {}
  using CausalLm::forward;
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) override {
    rows.push_back(tokens.size(0));
    widths.push_back(cache != nullptr ? cache->length : 0);
    auto logits = inner_->forward(tokens, cache);
    last.push_back(logits.select(1, -1).clone());
    return logits;
  }
  void set_fused_attention(bool on) override { inner_->set_fused_attention(on); }
  void reset_parameters() override { inner_->reset_parameters(); }
  torch::Tensor embed(const torch::Tensor& tokens) override { return inner_->embed(tokens); }
  torch::Tensor block(int64_t i, const torch::Tensor& h) override { return inner_->block(i, h); }
  torch::Tensor head(const torch::Tensor& h) override { return inner_->head(h); }
  std::vector<int64_t> rows, widths;
  std::vector<torch::Tensor> last;

 private:
  CausalLmPtr inner_;
};

// A rollout with what each step saw: steps[s] = the rows that drew at step s, in batch order.
struct Watch {
  RolloutBatch batch;
  std::vector<std::vector<int64_t>> steps;
  std::vector<int64_t> rows, widths;
  std::vector<torch::Tensor> last;
};

Watch watched_rollout(const CausalLmPtr& model, const std::vector<std::vector<int64_t>>& prompts,
                      int64_t group, const SamplingOptions& o,
                      const std::function<bool(int64_t row, int64_t step)>& go_on = {}) {
  auto w = std::make_shared<Watched>(model);
  Watch out;
  std::map<int64_t, int64_t> made;
  TokenSampler sampler(o, o.seed);
  out.batch = generate_groups(*w, prompts, group, o, sampler, [&](int64_t row, int64_t) {
    const int64_t step = made[row]++;
    if (out.steps.size() <= static_cast<size_t>(step)) out.steps.resize(step + 1);
    out.steps[static_cast<size_t>(step)].push_back(row);
    return go_on ? go_on(row, step) : true;
  });
  out.rows = w->rows;
  out.widths = w->widths;
  out.last = w->last;
  return out;
}

// The logits row `row` drew its step-s token from: the prefill's row of its prompt at step 0,
// else its place among that step's live rows.
torch::Tensor drawn_from(const Watch& w, int64_t row, int64_t step, int64_t group) {
  if (step == 0) return w.last[0][row / group];
  const auto& live = w.steps[static_cast<size_t>(step)];
  const auto at = std::find(live.begin(), live.end(), row) - live.begin();
  return w.last[static_cast<size_t>(step)][at];
}

// Each step's logits of `completion` computed alone: prompt + completion through one forward
// pass without a cache. n x vocab.
torch::Tensor alone_logits(CausalLm& m, const std::vector<int64_t>& prompt,
                           const std::vector<int64_t>& completion) {
  torch::NoGradGuard no_grad;
  m.eval();
  std::vector<int64_t> seq = prompt;
  seq.insert(seq.end(), completion.begin(), completion.end() - 1);
  const auto logits = m.forward(torch::tensor(seq, torch::kLong).unsqueeze(0))[0];
  return logits.narrow(0, static_cast<int64_t>(prompt.size()) - 1,
                       static_cast<int64_t>(completion.size()));
}

// Every row's logits, step by step, as the batch drew from them (stacked in row, step order).
torch::Tensor batched_logits(const Watch& w, int64_t group) {
  std::vector<torch::Tensor> all;
  for (size_t r = 0; r < w.batch.completions.size(); ++r)
    for (size_t s = 0; s < w.batch.completions[r].size(); ++s)
      all.push_back(drawn_from(w, static_cast<int64_t>(r), static_cast<int64_t>(s), group));
  return torch::stack(all);
}

torch::Tensor all_alone_logits(CausalLm& m, const std::vector<std::vector<int64_t>>& prompts,
                               const RolloutBatch& b, int64_t group) {
  std::vector<torch::Tensor> all;
  for (size_t r = 0; r < b.completions.size(); ++r)
    all.push_back(alone_logits(m, prompts[r / static_cast<size_t>(group)], b.completions[r]));
  return torch::cat(all);
}

std::vector<std::vector<int64_t>> random_prompts(const std::vector<int64_t>& lengths,
                                                 int64_t vocab) {
  torch::manual_seed(3);
  std::vector<std::vector<int64_t>> out;
  for (int64_t n : lengths)
    out.push_back(testing::to_ids(torch::randint(0, vocab, {n}, torch::kLong)));
  return out;
}

SamplingOptions greedy_options(int64_t new_tokens) {
  SamplingOptions o;
  o.temperature = 0;
  o.max_new_tokens = new_tokens;
  return o;
}

// The smallest gap between the largest and the second largest logit of any row: greedy choices
// of two computations within `d` of each other agree wherever the gap exceeds 2d.
double smallest_margin(const torch::Tensor& logits) {
  const auto top = std::get<0>(logits.to(torch::kDouble).topk(2, -1));
  return (top.select(-1, 0) - top.select(-1, 1)).min().item<double>();
}

// The batch against each prompt alone, in float32 and float64. The tolerance: float32's own
// rounding of these logits, measured in the run (alone in float32 against alone in float64), x10
// as hf_parity.h's: the batch rounds as much in another order (other GEMM shapes, masked
// softmax sums over padded widths), so the two float32 results lie within about 2x that of each
// other. In float64 the same argument gives float64's bound (hf_tolerance(0)).
void expect_batch_equals_alone(const std::string& family) {
  auto model = rollout_model(family);
  const auto prompts = random_prompts({1, 5, 17}, 300);
  const int64_t group = 2;
  const auto o = greedy_options(12);
  const auto w = watched_rollout(model, prompts, group, o);
  for (size_t p = 0; p < prompts.size(); ++p) {
    TokenSampler alone_sampler(o, 0);
    const auto alone = generate_rows(*model, prompts[p], 1, o, alone_sampler).front();
    for (int64_t g = 0; g < group; ++g)
      EXPECT_EQ(w.batch.completions[p * group + g], alone) << family << " prompt " << p;
  }
  const auto batched = batched_logits(w, group);
  const auto alone32 = all_alone_logits(*model, prompts, w.batch, group);
  model->to(torch::kDouble);
  const auto alone64 = all_alone_logits(*model, prompts, w.batch, group);
  const double noise = gpulab::test::relative_diff(alone32, alone64);
  const double tol = 10 * noise, diff = gpulab::test::relative_diff(batched, alone32);
  EXPECT_LT(diff, tol) << family;
  const double scale = alone64.abs().max().item<double>();
  const double margin = smallest_margin(alone64) / scale;
  EXPECT_GT(margin, 2 * tol) << family << ": a near tie; greedy tokens prove little here";
  // float64 throughout: the same rows, the same tokens, float64's bound.
  const auto w64 = watched_rollout(model, prompts, group, o);
  EXPECT_EQ(w64.batch.completions, w.batch.completions) << family;
  const double diff64 = gpulab::test::relative_diff(batched_logits(w64, group), alone64);
  EXPECT_LT(diff64, testing::hf_tolerance(0)) << family;
  EXPECT_EQ(w.rows.front(), 3) << "each prompt's prefix runs once, not once per row";
  EXPECT_EQ(w.batch.generated_tokens, 3 * group * 12);
  std::printf(
      "%s: prompts 1, 5, 17 x %lld rows, 12 greedy tokens: logits batched vs alone %.2e "
      "(tolerance %.2e = 10 x fp32's own rounding %.2e), float64 %.2e; smallest greedy margin "
      "%.2e (relative)\n",
      family.c_str(), static_cast<long long>(group), diff, tol, noise, diff64, margin);
}

TEST(Rollout, LlamaBatchOfUnequalPromptsEqualsEachAlone) {
  expect_batch_equals_alone("llama");
}

TEST(Rollout, Gpt2BatchOfUnequalPromptsEqualsEachAlone) {
  expect_batch_equals_alone("gpt2");
}

TEST(Rollout, RepetitionPenaltyReadsEachRowsOwnTokens) {
  // The padding is no token to the penalty: greedy with it, batched, equals each prompt alone.
  auto model = rollout_model("llama");
  const auto prompts = random_prompts({1, 5, 17}, 300);
  auto o = greedy_options(16);
  o.repetition_penalty = 1.5;
  const auto w = watched_rollout(model, prompts, 1, o);
  for (size_t p = 0; p < prompts.size(); ++p) {
    TokenSampler alone_sampler(o, 0);
    EXPECT_EQ(w.batch.completions[p], generate_rows(*model, prompts[p], 1, o, alone_sampler)[0]);
  }
}

TEST(Rollout, FinishedRowsLeaveTheBatchAndTheOthersGoOnAsTheyWere) {
  auto model = rollout_model("llama");
  const auto prompts = random_prompts({1, 5, 17}, 300);
  const auto o = greedy_options(10);
  const auto all = watched_rollout(model, prompts, 3, o);
  // Row 0 ends after its first token, prompt 2's rows (6-8, the longest prompt) after two, and
  // rows 1, 2 (the rest of prompt 0) and 4 after five: rows 3 and 5 go on alone.
  const auto stops = [](int64_t row, int64_t step) {
    if (row == 0) return step < 0;
    if (row >= 6) return step < 1;
    if (row == 1 || row == 2 || row == 4) return step < 4;
    return true;
  };
  const auto cut = watched_rollout(model, prompts, 3, o, stops);
  for (size_t r = 0; r < 9; ++r) {
    const auto& full = all.batch.completions[r];
    const size_t kept = r == 0 ? 1 : r >= 6 ? 2 : (r == 3 || r == 5) ? 10 : 5;
    EXPECT_EQ(cut.batch.completions[r], std::vector<int64_t>(full.begin(), full.begin() + kept))
        << "row " << r;
  }
  // The batch shrinks as rows finish: 3 prompts once, then 9 - 1, 8 - 3, 5 - 3 rows.
  EXPECT_EQ(cut.rows, (std::vector<int64_t>{3, 8, 5, 5, 5, 2, 2, 2, 2, 2}));
  // The cache narrows once the longest prompt's rows are gone: 17 columns then 18, then 12
  // columns of padding no live row holds drop (5 + 1 left); after step 4 only prompt 1's rows
  // remain, which hold every column (no mask from then on).
  EXPECT_EQ(cut.widths, (std::vector<int64_t>{0, 17, 6, 7, 8, 9, 10, 11, 12, 13}));
  // The rows that go on draw from the logits they drew from in the full batch: float32's noise
  // bound of expect_batch_equals_alone (two batches of different shapes round differently).
  const auto ours = batched_logits(cut, 3);
  std::vector<torch::Tensor> same;
  for (size_t r = 0; r < 9; ++r)
    for (size_t s = 0; s < cut.batch.completions[r].size(); ++s)
      same.push_back(drawn_from(all, static_cast<int64_t>(r), static_cast<int64_t>(s), 3));
  const auto ref = torch::stack(same);
  const auto alone32 = all_alone_logits(*model, prompts, cut.batch, 3);
  model->to(torch::kDouble);
  const double noise =
      gpulab::test::relative_diff(alone32, all_alone_logits(*model, prompts, cut.batch, 3));
  const double diff = gpulab::test::relative_diff(ours, ref);
  EXPECT_LT(diff, 10 * noise);
  std::printf("rows dropped mid-batch: live rows' logits vs the full batch %.2e (tolerance %.2e)\n",
              diff, 10 * noise);
}

// Sampling with nucleus and penalty on; rows may end early at EOS 7, so the batch shrinks while
// drawing.
SamplingOptions sampled_options(int64_t new_tokens) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_k = 0;
  o.top_p = 0.9;
  o.repetition_penalty = 1.2;
  o.max_new_tokens = new_tokens;
  o.eos_id = 7;
  return o;
}

TEST(Rollout, ASeedFixesASampledRun) {
  auto model = rollout_model("gpt2");
  const auto prompts = random_prompts({1, 5, 17}, 300);
  auto o = sampled_options(12);
  o.seed = 5;
  const auto a = watched_rollout(model, prompts, 4, o), b = watched_rollout(model, prompts, 4, o);
  EXPECT_EQ(a.batch.completions, b.batch.completions);
  o.seed = 6;
  // 12 draws a row over ~300 tokens: another seed giving the same 12 rows is ~impossible.
  EXPECT_NE(watched_rollout(model, prompts, 4, o).batch.completions, a.batch.completions);
  // A group's rows are draws of their own, not copies of one.
  for (size_t p = 0; p < prompts.size(); ++p)
    EXPECT_NE(a.batch.completions[4 * p], a.batch.completions[4 * p + 1]) << "prompt " << p;
  int64_t total = 0;
  for (const auto& c : a.batch.completions) {
    total += static_cast<int64_t>(c.size());
    const auto eos = std::find(c.begin(), c.end(), 7);
    EXPECT_TRUE(eos == c.end() ? c.size() == 12 : eos + 1 == c.end());
  }
  EXPECT_EQ(a.batch.generated_tokens, total);
}

// record_log_probs: each chosen token's log-probability, as GRPO's importance sampling reads it,
// equals token_log_probs over a full forward of the row's prompt and completion at the
// sampler's temperature (before its penalty, top-k and top-p). In fp64 the KV cache and the full
// forward differ only in the order of a few dozen additions (~1e-15); 1e-10 leaves a wide margin,
// and a log-probability at another temperature, or of another position, is off by more than 1e-2.
TEST(Rollout, RecordedLogProbsEqualAFullForwardOfEachRow) {
  auto model = rollout_model("llama");
  model->to(torch::kDouble);
  const auto prompts = random_prompts({1, 5, 17}, 300);
  SamplingOptions o;
  o.temperature = 0.7;
  o.top_k = 20;
  o.top_p = 0.9;
  o.repetition_penalty = 1.2;
  o.max_new_tokens = 10;
  o.seed = 3;
  o.eos_id = 7;
  o.record_log_probs = true;
  const auto w = watched_rollout(model, prompts, 3, o);
  ASSERT_EQ(w.batch.log_probs.size(), w.batch.completions.size());
  torch::NoGradGuard no_grad;
  double worst = 0;
  for (size_t r = 0; r < w.batch.completions.size(); ++r) {
    const auto& p = prompts[r / 3];
    const auto& c = w.batch.completions[r];
    ASSERT_EQ(w.batch.log_probs[r].size(), c.size()) << "row " << r;
    std::vector<int64_t> ids(p);
    ids.insert(ids.end(), c.begin(), c.end());
    const auto logits = model->forward(torch::tensor(ids, torch::kLong).unsqueeze(0));
    const auto plen = static_cast<int64_t>(p.size()), n = static_cast<int64_t>(c.size());
    const auto expected = token_log_probs(logits.narrow(1, plen - 1, n),
                                          torch::tensor(c, torch::kLong).unsqueeze(0), 0.7)[0];
    const auto recorded = torch::tensor(w.batch.log_probs[r], torch::kDouble);
    worst = std::max(worst, (recorded - expected).abs().max().item<double>());
  }
  EXPECT_LE(worst, 1e-10);
  std::printf("largest difference from a full forward: %.3g\n", worst);
  o.record_log_probs = false;
  EXPECT_TRUE(watched_rollout(model, prompts, 3, o).batch.log_probs.empty());
}

// A generation rank serving several training ranks batches their shares: each segment draws from
// its own sampler, so its rows get the tokens a batch of its own would draw (the same stream on
// the same logits), though the shared batch pads the prompts to another length. In fp64 that
// padding only reorders a few additions (~1e-15 in a log-probability); swapping the two streams
// changes the tokens.
TEST(Rollout, SegmentsDrawFromTheirOwnStreamsAsInBatchesOfTheirOwn) {
  auto model = rollout_model("llama");
  model->to(torch::kDouble);
  const auto both = random_prompts({1, 5, 17, 3, 9}, 300);
  const std::vector<std::vector<int64_t>> a(both.begin(), both.begin() + 2),
      b(both.begin() + 2, both.end());
  auto o = sampled_options(10);  // rows end early: segments shrink unevenly
  o.record_log_probs = true;
  TokenSampler alone_a(o, 5), alone_b(o, 9);
  const auto ra = generate_groups(*model, a, 3, o, alone_a);
  const auto rb = generate_groups(*model, b, 3, o, alone_b);
  TokenSampler sa(o, 5), sb(o, 9);
  const auto joint = generate_groups(*model, both, 3, o, {{2, &sa}, {3, &sb}});
  ASSERT_EQ(joint.completions.size(), 15u);
  double worst = 0;
  for (size_t r = 0; r < 15; ++r) {
    const auto& alone = r < 6 ? ra : rb;
    const size_t i = r < 6 ? r : r - 6;
    EXPECT_EQ(joint.completions[r], alone.completions[i]) << "row " << r;
    ASSERT_EQ(joint.log_probs[r].size(), alone.log_probs[i].size()) << "row " << r;
    for (size_t t = 0; t < joint.log_probs[r].size(); ++t)
      worst = std::max(worst, std::abs(joint.log_probs[r][t] - alone.log_probs[i][t]));
  }
  EXPECT_LE(worst, 1e-12);
  std::printf("segments vs batches of their own: same tokens, log-probs within %.3g\n", worst);
  TokenSampler swapped_a(o, 9), swapped_b(o, 5);
  const auto swapped = generate_groups(*model, both, 3, o, {{2, &swapped_a}, {3, &swapped_b}});
  EXPECT_NE(swapped.completions, joint.completions);
  TokenSampler short_a(o, 5);
  EXPECT_THROW(generate_groups(*model, both, 3, o, {{2, &short_a}}), Exception);
}

TEST(Rollout, BadPromptsAreNamedBeforeAnyForwardPass) {
  auto w = std::make_shared<Watched>(rollout_model("llama"));
  const auto o = greedy_options(8);
  TokenSampler sampler(o, 0);
  const auto refused = [&](const std::vector<std::vector<int64_t>>& prompts, int64_t group) {
    try {
      generate_groups(*w, prompts, group, o, sampler);
    } catch (const Exception& e) {
      EXPECT_EQ(e.error().code, Code::kInvalidArgument);
      return e.error().message;
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused({{1, 2}, {}}, 2).find("prompt 1 has no tokens"), std::string::npos);
  EXPECT_NE(refused({{1}, {2}, {3, 300}}, 2).find("prompt 2: token 300 is outside"),
            std::string::npos);
  EXPECT_NE(refused({{1}, {2}, {-1}}, 2).find("prompt 2: token -1"), std::string::npos);
  const std::vector<int64_t> long_prompt(57, 1);  // 57 + 8 new tokens > 64 positions
  EXPECT_NE(refused({long_prompt}, 1).find("prompt 0 (57 tokens)"), std::string::npos);
  EXPECT_NE(refused({}, 2).find("no prompts"), std::string::npos);
  EXPECT_NE(refused({{1}}, 0).find("a group of 0"), std::string::npos);
  EXPECT_TRUE(w->rows.empty()) << "a forward pass ran before the input was checked";
}

// transformers' generate() on the same weights, its prompts left-padded with an attention mask:
// the same greedy tokens for every row. float64, as hf_parity.h compares greedy tokens.
void expect_transformers_tokens(const std::string& family, const Json& kwargs) {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  gpulab::testing::TempDir dir("rollout_" + family);
  { std::ofstream(dir.path / "kwargs.json") << kwargs.dump(); }
  auto r = run_process(
      {testing::hf_python(), std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_reference.py",
       "padded", "--family", family, "--config", (dir.path / "kwargs.json").string(), "--out",
       dir.path.string(), "--lengths", "1,5,17", "--new_tokens", "12"},
      testing::reference_run());
  ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  DecoderConfig config;
  auto model = testing::load_hf_folder(dir.path / "hf", torch::kDouble, config);
  ASSERT_TRUE(model);
  const auto ref = read_safetensors(dir.path / "padded.safetensors").value().tensors;
  std::vector<std::vector<int64_t>> prompts;
  for (int i = 0; i < 3; ++i)
    prompts.push_back(testing::to_ids(ref.at("prompt." + std::to_string(i))));
  const auto o = greedy_options(12);
  TokenSampler sampler(o, 0);
  const auto ours = generate_groups(*model, prompts, 2, o, sampler);
  const auto theirs = ref.at("generated");
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t g = 0; g < 2; ++g)
      EXPECT_EQ(ours.completions[p * 2 + g], testing::to_ids(theirs[p]))
          << family << " prompt " << p << " row " << g;
  std::printf("%s: generate_groups vs transformers' left-padded generate(): %s\n", family.c_str(),
              ours.completions[0] == testing::to_ids(theirs[0]) &&
                      ours.completions[2] == testing::to_ids(theirs[1]) &&
                      ours.completions[4] == testing::to_ids(theirs[2])
                  ? "same tokens"
                  : "tokens differ");
}

TEST(RolloutParity, LlamaLeftPaddedGreedyMatchesTransformers) {
  expect_transformers_tokens("llama", testing::llama_gqa());
}

TEST(RolloutParity, Gpt2LeftPaddedGreedyMatchesTransformers) {
  expect_transformers_tokens("gpt2", Json{{"vocab_size", 300},
                                          {"n_embd", 96},
                                          {"n_inner", 200},
                                          {"n_layer", 2},
                                          {"n_head", 6},
                                          {"n_positions", 64},
                                          {"tie_word_embeddings", true},
                                          {"initializer_range", 0.2},
                                          {"bos_token_id", 0},
                                          {"eos_token_id", 0}});
}

// Several --prompt flags: one batch (generate_groups), each row printed under its prompt and
// sample; greedy, each row's text is what a run of that prompt alone prints.
TEST(GenerateCli, SeveralPromptsRunAsOneBatch) {
  ASSERT_TRUE(std::filesystem::exists(GPULAB_BINARY)) << "test_train depends on the gpulab target";
  gpulab::testing::TempDir dir("genbatch");
  auto c = rollout_shape("llama");
  c.vocab_size = 256;  // the bytes tokenizer's
  torch::manual_seed(11);
  auto m = build_causal_lm(c);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters())
      if (p.dim() >= 2) p.normal_(0.0, 0.2);
  }
  ASSERT_TRUE(write_safetensors(dir.path / "w.safetensors", module_state_dict(*m)).ok());
  {
    std::ofstream(dir.path / "config.json") << R"({"model_type": "llama", "vocab_size": 256,
    "hidden_size": 96, "intermediate_size": 200, "num_hidden_layers": 2,
    "num_attention_heads": 6, "num_key_value_heads": 2, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5, "rope_theta": 10000, "tie_word_embeddings": false})";
  }
  const std::vector<std::string> base = {"generate",
                                         "--model",
                                         (dir.path / "config.json").string(),
                                         "--weights",
                                         (dir.path / "w.safetensors").string(),
                                         "--tokenizer",
                                         "bytes",
                                         "--temperature",
                                         "0",
                                         "--max_new_tokens",
                                         "8"};
  const std::vector<std::string> prompts = {"ab", "hello there, world", "x"};
  auto batched = base;
  for (const auto& p : prompts) batched.insert(batched.end(), {"--prompt", p});
  batched.insert(batched.end(), {"--num_samples", "2"});
  const auto all = testing::run_gpulab(batched);
  ASSERT_EQ(all.exit_code, 0) << all.out << all.err;
  std::string expected;
  for (size_t p = 0; p < prompts.size(); ++p) {
    auto single = base;
    single.insert(single.end(), {"--prompt", prompts[p]});
    const auto one = testing::run_gpulab(single);
    ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
    for (int s = 1; s <= 2; ++s)
      expected += "[prompt " + std::to_string(p + 1) + "/3, sample " + std::to_string(s) + "/2]\n" +
                  one.out;
  }
  EXPECT_EQ(all.out, expected);
  EXPECT_NE(all.err.find("generated 48 tokens"), std::string::npos) << all.err;
}

}  // namespace
}  // namespace gpulab::train
