// The Llama decoder on its own: shapes and counts from the config (published sizes), config.json
// errors, KV-cached decoding against the full forward pass, activation checkpointing against
// keeping activations, and the position limit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "train/models/layers.h"
#include "train/models/llama/llama.h"

namespace gpulab::train {
namespace {

DecoderConfig small_gqa() {
  DecoderConfig c;
  c.name = "small-gqa";
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.max_positions = 40;
  return c;
}

TEST(Llama, ParameterCountFromConfigMatchesTheModule) {
  torch::manual_seed(0);
  for (DecoderConfig c : {find_decoder_config("llama-tiny").value(), small_gqa()}) {
    LlamaForCausalLM m(c);
    EXPECT_EQ(count_parameters(m), c.num_parameters()) << c.name;
    c.tie_word_embeddings = !c.tie_word_embeddings;
    LlamaForCausalLM other(c);
    EXPECT_EQ(count_parameters(other), c.num_parameters()) << c.name << " tied flipped";
  }
}

// The counts published with the checkpoints (Meta's and Mistral's model cards).
TEST(Llama, PublishedShapesHaveTheirPublishedSizes) {
  EXPECT_EQ(find_decoder_config("llama3-8b")->num_parameters(), 8030261248);
  EXPECT_EQ(find_decoder_config("llama3-70b")->num_parameters(), 70553706496);
  EXPECT_EQ(find_decoder_config("mistral-7b")->num_parameters(), 7241732096);
  EXPECT_EQ(find_decoder_config("llama-1b")->num_parameters(), 1235814400);
  // 6 N per token plus the attention term 12 L H d T, N without the input embedding and the
  // norm scales (65 of them: two per layer and the final one).
  const DecoderConfig c = find_decoder_config("llama3-8b").value();
  const double n =
      static_cast<double>(c.num_parameters() - c.vocab_size * c.hidden_size - 65 * 4096);
  EXPECT_NEAR(c.train_flops_per_token(8192), 6 * n + 12.0 * 32 * 4096 * 8192, 1e3);
}

TEST(Llama, ConfigJsonMissingFieldsAreOneErrorNamingThem) {
  Json j = small_gqa().to_json();
  j.erase("hidden_size");
  j.erase("rms_norm_eps");
  auto r = decoder_config_from_json(j, "config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_NE(r.error().message.find("hidden_size, rms_norm_eps"), std::string::npos)
      << r.error().message;
  // Defaults of transformers' DecoderConfig for the optional fields.
  Json k = small_gqa().to_json();
  k.erase("num_key_value_heads");
  k.erase("rope_theta");
  auto c = decoder_config_from_json(k, "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_kv_heads, c->num_heads);
  EXPECT_EQ(c->rope_theta, 10000);
  k["num_key_value_heads"] = 3;  // does not divide 4 heads
  EXPECT_FALSE(decoder_config_from_json(k, "config.json").ok());
}

TEST(Llama, KvCachedDecodingMatchesTheFullForwardPass) {
  torch::manual_seed(1);
  LlamaForCausalLM m(small_gqa());
  m.eval();
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, 97, {2, 12});
  auto full = m.forward(tokens);
  KvCache cache;
  auto first = m.forward(tokens.narrow(1, 0, 7), &cache);  // a prompt, then one token at a time
  EXPECT_TRUE(torch::allclose(first, full.narrow(1, 0, 7), 1e-5, 1e-5));
  for (int64_t i = 7; i < 12; ++i) {
    auto step = m.forward(tokens.narrow(1, i, 1), &cache);
    EXPECT_TRUE(torch::allclose(step, full.narrow(1, i, 1), 1e-5, 1e-5)) << "position " << i;
  }
  EXPECT_EQ(cache.length, 12);
}

TEST(Llama, ActivationCheckpointingGivesTheSameGradients) {
  torch::manual_seed(2);
  LlamaForCausalLM a(small_gqa());
  LlamaForCausalLM b(small_gqa());
  {
    torch::NoGradGuard no_grad;
    auto pa = a.parameters(), pb = b.parameters();
    for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  }
  b.set_activation_checkpointing(true);
  auto tokens = torch::randint(0, 97, {2, 16});
  a.forward(tokens).pow(2).mean().backward();
  b.forward(tokens).pow(2).mean().backward();
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_TRUE(pb[i].value().grad().defined()) << pb[i].key();
    EXPECT_TRUE(torch::allclose(pa[i].value().grad(), pb[i].value().grad(), 1e-5, 1e-6))
        << pa[i].key();
  }
}

TEST(Llama, SequenceBeyondThePositionsIsAClearError) {
  LlamaForCausalLM m(small_gqa());
  try {
    m.forward(torch::zeros({1, 41}, torch::kLong));
    FAIL() << "no error";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("40"), std::string::npos) << e.what();
  }
}

TEST(Llama, HuggingFaceParameterNames) {
  LlamaForCausalLM m(small_gqa());
  auto names = m.named_parameters().keys();
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "model.layers.2.self_attn.k_proj.weight"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "model.layers.0.mlp.gate_proj.weight"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "model.layers.1.post_attention_layernorm.weight"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "model.norm.weight"), names.end());
  EXPECT_EQ(names.back(), "lm_head.weight");
}

}  // namespace
}  // namespace gpulab::train
