// The GPT-2 family, the second decoder behind the model-family seam: its shapes and counts
// (gpt2-124m has GPT-2 small's published 124,439,808 parameters), config.json both ways, parity
// with transformers' own GPT2LMHeadModel (tests/train/hf_parity.h: logits, loss, every gradient
// and greedy tokens, float64 and float32) with a negative control, and a run through
// `gpulab train` and `gpulab generate` (KV-cached decoding and activation checkpointing are every
// family's: lm_family_test.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "core/json.h"
#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "support/tensor_diff.h"
#include "train/hf_parity.h"
#include "train/models/gpt2/gpt2.h"
#include "train/models/lm_families.h"
#include "train/torchvision_python.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;

DecoderConfig gpt2_odd_shape() {
  DecoderConfig c;
  c.family = "gpt2";
  c.name = "gpt2-odd";
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 200;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 6;
  c.max_positions = 64;
  c.norm_eps = 1e-6;
  c.tie_word_embeddings = false;
  return c;
}

int64_t numel_of(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(Gpt2, PublishedParameterCounts) {
  const auto small = find_decoder_config("gpt2-124m").value();
  const auto medium = find_decoder_config("gpt2-355m").value();
  EXPECT_EQ(small.family, "gpt2");
  EXPECT_EQ(small.num_parameters(), 124439808);   // transformers' gpt2
  EXPECT_EQ(medium.num_parameters(), 354823168);  // gpt2-medium
  // The module itself, not only the formula.
  auto model = build_causal_lm(small);
  EXPECT_EQ(numel_of(*model), 124439808);
  for (const DecoderConfig& c : {find_decoder_config("gpt2-tiny").value(), gpt2_odd_shape()}) {
    auto m = build_causal_lm(c);
    EXPECT_EQ(numel_of(*m), c.num_parameters()) << c.name;
  }
}

TEST(Gpt2, HuggingFaceNamesAndConfigJsonBothWays) {
  Gpt2LMHeadModel m(gpt2_odd_shape());
  auto params = m.named_parameters();
  EXPECT_EQ(params.keys().front(), "transformer.wte.weight");
  ASSERT_TRUE(params.contains("transformer.h.1.attn.c_attn.weight"));
  EXPECT_EQ(params["transformer.h.1.attn.c_attn.weight"].sizes(), (std::vector<int64_t>{96, 288}));
  EXPECT_TRUE(params.contains("lm_head.weight"));
  const Json j = m.config().to_json();
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["n_embd"], 96);
  auto back = decoder_config_from_json(j, "round trip").value_or_throw();
  EXPECT_EQ(back.family, "gpt2");
  EXPECT_EQ(back.num_parameters(), m.config().num_parameters());
  auto bad = decoder_config_from_json(Json{{"model_type", "gpt2"}, {"n_embd", 64}}, "c.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("n_layer, n_head, vocab_size"), std::string::npos)
      << bad.error().message;
  // A hostile width without n_inner (4 x n_embd would overflow) and a mistyped activation are
  // errors, not undefined behaviour or a silent default.
  auto wide = decoder_config_from_json(Json{{"model_type", "gpt2"},
                                            {"n_embd", int64_t{1} << 62},
                                            {"n_layer", 1},
                                            {"n_head", 1},
                                            {"vocab_size", 10}},
                                       "c.json");
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("implausibly large"), std::string::npos)
      << wide.error().message;
  Json typed = m.config().to_json();
  typed["activation_function"] = 3;
  auto bad_act = decoder_config_from_json(typed, "c.json");
  ASSERT_FALSE(bad_act.ok());
  EXPECT_NE(bad_act.error().message.find("activation_function"), std::string::npos);
  auto grouped = gpt2_odd_shape();
  grouped.num_kv_heads = 2;
  EXPECT_FALSE(grouped.validate().ok());
}

// The tolerances are hf_parity.h's: 10x transformers' own rounding in the same run, and 1e-10 in
// float64, where its GPT2LMHeadModel (nn.LayerNorm, the tanh GELU, sdpa, Conv1D's addmm) rounds
// through float32 nowhere, as gpulab's does not.
Json gpt2_hf_tiny() {  // gpt2-tiny's shape with a small vocabulary: tied, n_inner 4 x n_embd
  return Json{{"vocab_size", 512}, {"n_embd", 256},     {"n_layer", 4},
              {"n_head", 8},       {"n_positions", 64}, {"initializer_range", 0.2},
              {"bos_token_id", 0}, {"eos_token_id", 0}};
}

Json gpt2_hf_odd() {  // untied, an odd MLP width and epsilon
  const auto c = gpt2_odd_shape();
  return Json{{"vocab_size", c.vocab_size},
              {"n_embd", c.hidden_size},
              {"n_layer", c.num_layers},
              {"n_head", c.num_heads},
              {"n_inner", c.intermediate_size},
              {"n_positions", c.max_positions},
              {"layer_norm_epsilon", c.norm_eps},
              {"tie_word_embeddings", false},
              {"initializer_range", 0.2},
              {"bos_token_id", 0},
              {"eos_token_id", 0}};
}

// Against transformers' own GPT2LMHeadModel, written by save_pretrained and read from that
// folder (config.json's GPT-2 names, Conv1D's in x out weights as they are).
// (gpt2-tiny's tied shape is every family's FamilyParity row.)
TEST(Gpt2Parity, UntiedOddShapeMatchesTransformersInFp64) {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  const auto c = testing::compare_with_transformers({"gpt2", gpt2_hf_odd(), "float64"}, "gpt2_odd");
  testing::expect_hf_parity(c, "gpt2_odd", true);
}

// The hub's layout (GPT2Model's names without "transformer.", a causal-mask buffer per block, as
// OpenAI's published file holds them) loads through the GPT-2 family's name mapping.
TEST(Gpt2Parity, HubLayoutMatchesTransformersInFp64) {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  testing::HfCase hub{"gpt2", gpt2_hf_tiny(), "float64"};
  hub.layout = "hub";
  const auto c = testing::compare_with_transformers(hub, "gpt2_hub");
  testing::expect_hf_parity(c, "gpt2 hub layout", true);
}

TEST(Gpt2Parity, UntiedMatchesTransformersInFp32) {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  const auto c = testing::compare_with_transformers({"gpt2", gpt2_hf_odd(), "float32"}, "gpt2_f32");
  testing::expect_hf_parity(c, "gpt2 fp32", false);  // float32 may flip a greedy near tie
}

// Negative control: transformers' GPT-2 with its attention scores left unscaled
// (scale_attn_weights false) is another model than the one it wrote; the same check must flag
// it, or the checks above prove nothing.
TEST(Gpt2Parity, UnscaledAttentionFailsTheCheck) {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  const auto c = testing::compare_with_transformers({"gpt2", gpt2_hf_odd(), "float64", "unscaled"},
                                                    "gpt2_neg");
  testing::expect_hf_mismatch(c, "gpt2, unscaled attention");
}

// Through the CLI like any language model: it learns the synthetic stream, writes a GPT-2
// config.json beside its weights, and `gpulab generate` continues a prompt from the run folder.
TEST(Gpt2Train, TinyTrainsAndGeneratesThroughTheCli) {
  const fs::path out = testing::temp_dir("gpt2_cli");
  auto r = testing::run_gpulab({"train",
                                "--model",
                                "gpt2-tiny",
                                "--dataset",
                                "synthetic-text",
                                "--seq_len",
                                "64",
                                "--batch_size",
                                "8",
                                "--learning_rate",
                                "3e-3",
                                "--num_epochs",
                                "2",
                                "--limit_train_batches",
                                "10",
                                "--device",
                                "cpu",
                                "--precision",
                                "fp32",
                                "--threads",
                                "2",
                                "--output_dir",
                                out.string(),
                                "--no_report"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Training gpt2-tiny"), std::string::npos) << r.out;
  std::vector<double> losses;
  for (const auto& e : testing::epoch_records(out)) losses.push_back(e["test_loss"].get<double>());
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_LT(losses[1], losses[0]);
  EXPECT_LT(losses[1], 4.5) << "validation loss after 20 steps (ln 256 = 5.55 at the start)";
  std::ifstream config(out / "config.json");
  ASSERT_TRUE(config.good());
  EXPECT_EQ(Json::parse(config)["model_type"], "gpt2");
  auto g = testing::run_gpulab({"generate", "--model", out.string(), "--weights",
                                (out / "model.safetensors").string(), "--prompt", "ab",
                                "--max_new_tokens", "8", "--temperature", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
  EXPECT_GE(g.out.size(), 10u);
  fs::remove_all(out);
}

}  // namespace
}  // namespace gpulab::train
