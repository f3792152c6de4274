// The Llama family and its Qwen2 variant against Hugging Face transformers' own
// LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM (tests/train/hf_parity.h): small
// random models written by save_pretrained and read by gpulab from that folder give the same
// logits, loss, every gradient and greedy tokens, in float64 and float32, on both attention
// paths; the other rotary layout, and Qwen2 without its q/k/v biases, fail. (The tiny shape of
// each family is FamilyParity's row: lm_family_parity_test.cpp.)
#include <gtest/gtest.h>

#include "train/hf_parity.h"

namespace gpulab::train {
namespace {

using testing::compare_with_transformers;
using testing::expect_hf_mismatch;
using testing::expect_hf_parity;

// The tolerances are hf_parity.h's: 10x transformers' own rounding in the same run. Its float64
// Llama and Mistral round every RMSNorm through float32 (LlamaRMSNorm casts to float32 and back
// whatever the model's dtype), so their float64 tolerance is that rounding's, not float64's.

// Mistral: a head_dim other than hidden / heads (as Mistral Nemo's), and a sliding window as
// long as the test's sequences, which attend over all of it.
Json mistral() {
  return Json{{"vocab_size", 320},        {"hidden_size", 96},
              {"intermediate_size", 160}, {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"head_dim", 32},           {"max_position_embeddings", 128},
              {"sliding_window", 24},     {"rope_theta", 1000000.0},
              {"rms_norm_eps", 1e-5},     {"tie_word_embeddings", false},
              {"initializer_range", 0.2}, {"bos_token_id", 0},
              {"eos_token_id", 0}};
}

// Qwen2: grouped-query (6 heads, 2 kv heads), q/k/v biases (hf_reference.py moves every vector,
// the biases too, off its initial value, so their gradients and their effect are checked), tied
// embeddings, rope_theta 1e6, RMSNorm eps 1e-6, as the Qwen2.5 configs.
Json qwen2_small() {
  return Json{{"vocab_size", 320},
              {"hidden_size", 96},
              {"intermediate_size", 224},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 6},
              {"num_key_value_heads", 2},
              {"max_position_embeddings", 64},
              {"rope_theta", 1000000.0},
              {"rms_norm_eps", 1e-6},
              {"tie_word_embeddings", true},
              {"initializer_range", 0.2},
              {"bos_token_id", 0},
              {"eos_token_id", 0}};
}

#define REQUIRE_REFERENCE()         \
  if (testing::hf_python().empty()) \
  GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors")

TEST(LlamaParity, GroupedQueryTiedMatchesTransformersInFp64) {
  REQUIRE_REFERENCE();
  const auto c = compare_with_transformers({"llama", testing::llama_gqa(), "float64"}, "llama_gqa");
  EXPECT_EQ(c.config.rope_theta, 500000.0) << "rope_parameters.rope_theta not read";
  EXPECT_TRUE(c.config.tie_word_embeddings);
  expect_hf_parity(c, "llama gqa", true);
}

TEST(LlamaParity, MistralMatchesTransformersInFp64) {
  REQUIRE_REFERENCE();
  const auto c = compare_with_transformers({"mistral", mistral(), "float64"}, "mistral");
  EXPECT_EQ(c.config.max_positions, 24) << "the sliding window bounds the positions";
  EXPECT_EQ(c.config.dim_per_head(), 32);
  expect_hf_parity(c, "mistral", true);
}

TEST(LlamaParity, LlamaAndMistralMatchTransformersInFp32) {
  REQUIRE_REFERENCE();
  // Greedy tokens are compared in float64 only: float32 rounding may flip a near tie.
  expect_hf_parity(
      compare_with_transformers({"llama", testing::llama_gqa(), "float32"}, "llama_f32"),
      "llama gqa fp32", false);
  expect_hf_parity(compare_with_transformers({"mistral", mistral(), "float32"}, "mistral_f32"),
                   "mistral fp32", false);
}

// Negative control: transformers computing with the rotary pairs interleaved (Meta's original
// layout) is another model than the one it wrote; the same checks must flag it, or the checks
// above prove nothing.
TEST(LlamaParity, OtherRotaryLayoutFailsTheCheck) {
  REQUIRE_REFERENCE();
  const auto c = compare_with_transformers(
      {"llama", testing::llama_gqa(), "float64", "interleaved_rotary"}, "llama_neg");
  expect_hf_mismatch(c, "llama, interleaved rotary");
}

TEST(Qwen2Parity, GroupedQueryBiasesTiedMatchesTransformersInFp64) {
  REQUIRE_REFERENCE();
  const auto c = compare_with_transformers({"qwen2", qwen2_small(), "float64"}, "qwen2");
  EXPECT_EQ(c.config.family, "qwen2") << "model_type qwen2 read as another family";
  EXPECT_EQ(c.config.rope_theta, 1e6);
  EXPECT_EQ(c.config.norm_eps, 1e-6);
  EXPECT_TRUE(c.config.tie_word_embeddings);
  expect_hf_parity(c, "qwen2", true);
}

TEST(Qwen2Parity, MatchesTransformersInFp32) {
  REQUIRE_REFERENCE();
  // Greedy tokens in float64 only, as above.
  expect_hf_parity(compare_with_transformers({"qwen2", qwen2_small(), "float32"}, "qwen2_f32"),
                   "qwen2 fp32", false);
}

// Negative control: transformers computing with the q/k/v biases zeroed is another model than
// the one it wrote; gpulab (which applies them) must fail the same checks.
TEST(Qwen2Parity, WithoutQkvBiasesFailsTheCheck) {
  REQUIRE_REFERENCE();
  const auto c =
      compare_with_transformers({"qwen2", qwen2_small(), "float64", "no_qkv_bias"}, "qwen2_neg");
  expect_hf_mismatch(c, "qwen2 without q/k/v biases");
}

}  // namespace
}  // namespace gpulab::train
