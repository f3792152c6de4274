// The Llama decoder on its own, and Qwen2 (Llama's modules with q/k/v biases): shapes and counts
// from the config (published sizes; every listed shape's count against transformers' own class),
// config.json errors and dialects, and the position limit. KV-cached decoding and activation
// checkpointing are every family's (lm_family_test.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "core/error.h"
#include "support/temp_dir.h"
#include "train/hf_parity.h"
#include "train/models/layers.h"
#include "train/models/llama/llama.h"
#include "train/trainer_test_util.h"

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

DecoderConfig small_qwen2() {
  DecoderConfig c = small_gqa();
  c.name = "small-qwen2";
  c.family = "qwen2";
  c.tie_word_embeddings = true;
  return c;
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

// Qwen2: Llama's blocks with biases on q, k and v only (o_proj and the MLP have none), zero at
// initialisation as transformers' _init_weights sets them; the count formula equals the module's.
TEST(Qwen2, QkvBiasesAndCountsFromTheModule) {
  for (DecoderConfig c : {find_decoder_config("qwen2-tiny").value(), small_qwen2()}) {
    c.vocab_size = 97;
    LlamaForCausalLM m(c);
    EXPECT_EQ(count_parameters(m), c.num_parameters()) << c.name;
    const auto params = m.named_parameters();
    ASSERT_TRUE(params.contains("model.layers.0.self_attn.q_proj.bias")) << c.name;
    EXPECT_EQ(params["model.layers.0.self_attn.k_proj.bias"].size(0),
              c.num_kv_heads * c.dim_per_head());
    EXPECT_TRUE(params.contains("model.layers.0.self_attn.v_proj.bias"));
    EXPECT_FALSE(params.contains("model.layers.0.self_attn.o_proj.bias"));
    EXPECT_FALSE(params.contains("model.layers.0.mlp.up_proj.bias"));
    EXPECT_FALSE(params.contains("lm_head.weight")) << "tied: one table";
    EXPECT_EQ(params["model.layers.0.self_attn.q_proj.bias"].abs().max().item<double>(), 0.0);
    c.tie_word_embeddings = false;
    LlamaForCausalLM untied(c);
    EXPECT_EQ(count_parameters(untied), c.num_parameters()) << c.name << " untied";
  }
  const auto q = find_decoder_config("qwen2.5-1.5b").value();
  EXPECT_EQ(q.family, "qwen2");
  EXPECT_EQ(q.rope_theta, 1e6);
  EXPECT_EQ(q.norm_eps, 1e-6);
  EXPECT_TRUE(q.tie_word_embeddings);
  EXPECT_FALSE(find_decoder_config("qwen2.5-7b")->tie_word_embeddings);
}

// Every shape `gpulab models --json` lists (every family), counted by transformers' own class
// for the config.json gpulab writes of it (tests/parity/hf_param_count.py, on the meta device):
// the listing's count is exactly transformers' num_parameters().
TEST(DecoderShapes, ListedCountsEqualTransformers) {
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  gpulab::testing::TempDir dir("lm_counts");
  auto listed = testing::run_gpulab({"models", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  { std::ofstream(dir.path / "models.json") << listed.out; }
  auto py = run_process(
      {testing::hf_python(), std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_param_count.py",
       (dir.path / "models.json").string()},
      testing::reference_run());
  ASSERT_TRUE(py.ok() && py->success()) << (py.ok() ? py->err : py.error().message);
  const Json theirs = Json::parse(py->out);
  const Json ours = Json::parse(listed.out)["language_models"];
  ASSERT_EQ(theirs.size(), ours.size());
  int qwen2 = 0;
  for (const auto& m : ours) {
    const std::string name = m["name"];
    ASSERT_TRUE(theirs.contains(name)) << name;
    EXPECT_EQ(m["params"].get<int64_t>(), theirs[name].get<int64_t>()) << name;
    EXPECT_EQ(m["params"].get<int64_t>(), find_decoder_config(name)->num_parameters()) << name;
    if (m["family"] == "qwen2") ++qwen2;
    std::printf("%s (%s): gpulab %lld, transformers %lld\n", name.c_str(),
                m["family"].get<std::string>().c_str(),
                static_cast<long long>(m["params"].get<int64_t>()),
                static_cast<long long>(theirs[name].get<int64_t>()));
  }
  EXPECT_EQ(qwen2, 4) << "qwen2-tiny, qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b";
}

// Qwen2's config.json dialect: written and read back; its sliding window is off unless
// use_sliding_window says on; an unknown or mistyped model_type and missing fields are refused
// naming them (the CLI too, exit 2).
TEST(Qwen2, ConfigJsonDialectAndBadInput) {
  const DecoderConfig c = find_decoder_config("qwen2.5-0.5b").value();
  Json j = c.to_json();
  EXPECT_EQ(j["model_type"], "qwen2");
  EXPECT_EQ(j["architectures"][0], "Qwen2ForCausalLM");
  auto back = decoder_config_from_json(j, "config.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->family, "qwen2");
  EXPECT_EQ(back->num_parameters(), c.num_parameters());
  EXPECT_EQ(back->rope_theta, 1e6);
  // Qwen2.5-1.5B-Instruct's own config.json (the fuzz corpus' copy) is the listed shape.
  auto published = find_decoder_config(std::string(GPULAB_SOURCE_DIR) +
                                       "/tests/fuzz/corpus/hf_config/qwen2.5-1.5b-instruct.json");
  ASSERT_TRUE(published.ok()) << published.error().message;
  const auto listed = find_decoder_config("qwen2.5-1.5b").value();
  EXPECT_EQ(published->family, "qwen2");
  EXPECT_EQ(published->num_parameters(), listed.num_parameters());
  EXPECT_EQ(published->max_positions, 32768) << "its sliding_window is off (use_sliding_window)";
  EXPECT_EQ(published->to_json(), listed.to_json());
  Json window = j;
  window.erase("use_sliding_window");
  window["sliding_window"] = 4096;
  EXPECT_EQ(decoder_config_from_json(window, "w")->max_positions, 32768) << "off by default";
  window["use_sliding_window"] = true;
  EXPECT_EQ(decoder_config_from_json(window, "w")->max_positions, 4096);
  for (const Json& type : {Json("qwen3"), Json(7)}) {
    Json bad = j;
    bad["model_type"] = type;
    auto r = decoder_config_from_json(bad, "config.json");
    ASSERT_FALSE(r.ok()) << type;
    EXPECT_NE(r.error().message.find("model_type " + type.dump()), std::string::npos)
        << r.error().message;
  }
  Json missing = j;
  missing.erase("num_attention_heads");
  auto r = decoder_config_from_json(missing, "config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("num_attention_heads"), std::string::npos);

  Json unknown = j;
  unknown["model_type"] = "qwen3";
  gpulab::testing::TempDir dir("qwen2_bad_config");
  for (const auto& [name, bad, field] :
       {std::tuple{"unknown.json", unknown, "model_type"},
        std::tuple{"missing.json", missing, "num_attention_heads"}}) {
    { std::ofstream(dir.path / name) << bad.dump(); }
    const std::string file = (dir.path / name).string();
    const auto run = dir.path / "run";
    for (const auto& args :
         {std::vector<std::string>{"plan", "--model", file},
          std::vector<std::string>{"train", "--model", file, "--dataset", "synthetic-text",
                                   "--max_steps", "1", "--output_dir", run.string()}}) {
      auto g = testing::run_gpulab(args);
      EXPECT_EQ(g.exit_code, 2) << args[0] << " " << name << g.out << g.err;
      EXPECT_NE(g.err.find(field), std::string::npos) << g.err;
    }
    EXPECT_FALSE(std::filesystem::exists(run)) << "a refused run wrote its folder";
  }
}

}  // namespace
}  // namespace gpulab::train
