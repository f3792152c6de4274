// The planner's decoder footprint (Llama, Qwen2 and GPT-2) from the shape alone against the real
// model measured by the same counter: the same flat groups, and activations per sequence within
// 10 % (plain and fused attention, each probed on its own path); and `gpulab plan` answering for
// llama3-70b without allocating it.
#include <gtest/gtest.h>

#include <cmath>

#include "train/dist/decoder_footprint.h"
#include "train/models/lm_families.h"
#include "train/trainer_test_util.h"

namespace gpulab::train::dist {
namespace {

DecoderConfig named(const std::string& name) {
  return find_decoder_config(name).value_or_throw();
}

void expect_close(const DecoderConfig& c, int64_t seq_len, bool fused) {
  const auto planned = decoder_footprint(c, seq_len, fused);
  const auto measured = measured_decoder_footprint(c, seq_len, fused);
  EXPECT_EQ(planned.params, measured.params) << c.name;
  EXPECT_EQ(planned.units, measured.units) << c.name;
  EXPECT_EQ(planned.frees, measured.frees) << c.name;
  const double p = static_cast<double>(planned.activation_bytes_per_sample);
  const double m = static_cast<double>(measured.activation_bytes_per_sample);
  std::printf("%s, seq %lld, %s attention: activations planned %s, measured %s (%+.2f %%)\n",
              c.name.c_str(), static_cast<long long>(seq_len), fused ? "fused" : "plain",
              human_bytes(planned.activation_bytes_per_sample).c_str(),
              human_bytes(measured.activation_bytes_per_sample).c_str(), 100.0 * (p - m) / m);
  EXPECT_LE(std::abs(p - m), 0.10 * m) << c.name;
}

TEST(DecoderFootprint, MatchesTheRealModel) {
  for (bool fused : {false, true}) {
    expect_close(named("llama-tiny"), 128, fused);
    DecoderConfig gqa = named("llama-tiny");
    gqa.name = "llama-tiny with 2 kv heads, tied";
    gqa.num_kv_heads = 2;
    gqa.tie_word_embeddings = true;
    expect_close(gqa, 96, fused);
    expect_close(named("llama-125m"), 256, fused);
    // The second family: learned positions, biases, LayerNorm, a two-matrix MLP.
    expect_close(named("gpt2-tiny"), 128, fused);
    DecoderConfig untied = named("gpt2-tiny");
    untied.name = "gpt2-tiny untied";
    untied.tie_word_embeddings = false;
    expect_close(untied, 64, fused);
    // Qwen2: Llama's blocks with q/k/v biases (its vectors group), its own probe fit.
    expect_close(named("qwen2-tiny"), 128, fused);
  }
}

// Neither attention path (sdpa, gpulab's kernel) keeps the heads x T x T scores (libtorch 1.13's
// masked softmax did): four times the tokens is four times the activations, not sixteen (a kept
// score term, 12 heads x T^2 x 4 bytes = 50 MB at 1024 tokens, would take the ratio past 5).
TEST(DecoderFootprint, NeitherAttentionPathKeepsTheScores) {
  const auto c = named("llama-125m");
  for (const bool gpulab_kernel : {false, true}) {
    const double short_seq = decoder_footprint(c, 256, gpulab_kernel).activation_bytes_per_sample;
    const double long_seq = decoder_footprint(c, 1024, gpulab_kernel).activation_bytes_per_sample;
    EXPECT_LT(long_seq, 4.5 * short_seq) << (gpulab_kernel ? "gpulab kernel" : "sdpa");
    EXPECT_GT(long_seq, 3.5 * short_seq) << (gpulab_kernel ? "gpulab kernel" : "sdpa");
  }
}

// The generation rank's planned memory (GRPO's split) is what a real decoder holds: its
// parameters, the KV cache its forward pass fills for `rows` rows of `length` positions, and one
// position's logits a row; Qwen2's grouped-query attention (2 kv heads of 8) and tied embeddings.
TEST(DecoderFootprint, GenerationMemoryIsWhatTheModelAndItsKvCacheHold) {
  const DecoderConfig c = named("qwen2-tiny");
  const int64_t rows = 3, length = 40;
  auto model = build_causal_lm(c);
  model->eval();
  torch::NoGradGuard no_grad;
  KvCache cache;
  cache.last_logits_only = true;
  auto logits = model->forward(torch::zeros({rows, length}, torch::kLong), &cache);
  int64_t kv = 0, weights = 0;
  for (const auto& t : cache.keys) kv += t.numel() * t.element_size();
  for (const auto& t : cache.values) kv += t.numel() * t.element_size();
  for (const auto& p : model->parameters()) weights += p.numel() * p.element_size();
  const auto planned = generation_memory(c, rows, length, 4, 4);  // fp32 weights and cache
  EXPECT_EQ(planned.kv_cache, kv);
  EXPECT_EQ(planned.weights, weights);
  EXPECT_EQ(planned.logits, logits.numel() * logits.element_size());
}

TEST(DecoderFootprint, PlanAnswersForLlama70bWithoutAllocatingIt) {
  auto r = testing::run_gpulab({"plan", "--model", "llama3-70b", "--gpus", "8", "--gpu", "mi300x",
                                "--precision", "bf16", "--seq_len", "8192",
                                "--activation_checkpointing"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("70553706496 parameters"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("full"), std::string::npos) << r.out;
  auto bad = testing::run_gpulab({"plan", "--model", "llama-tiny", "--seq_len", "5000"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("beyond"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace gpulab::train::dist
