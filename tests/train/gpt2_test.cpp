// The GPT-2 family, the second decoder behind the model-family seam: its shapes and counts
// (gpt2-124m has GPT-2 small's published 124,439,808 parameters), config.json both ways, parity
// with an independent PyTorch implementation (tests/parity/gpt2_reference.py) within 1e-4 on
// logits, loss and every gradient in fp32, with a negative control, KV-cached decoding and
// activation checkpointing, and a run through `gpulab train` and `gpulab generate`.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "core/json.h"
#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "support/tensor_diff.h"
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

TEST(Gpt2, KvCachedDecodingMatchesTheFullForwardPass) {
  torch::manual_seed(1);
  Gpt2LMHeadModel m(gpt2_odd_shape());
  m.eval();
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, 300, {2, 12});
  auto full = m.forward(tokens);  // the fused CPU kernel where it applies; the cache never
  KvCache cache;
  auto first = m.forward(tokens.narrow(1, 0, 7), &cache);
  EXPECT_TRUE(torch::allclose(first, full.narrow(1, 0, 7), 1e-5, 1e-5));
  for (int64_t i = 7; i < 12; ++i) {
    auto step = m.forward(tokens.narrow(1, i, 1), &cache);
    EXPECT_TRUE(torch::allclose(step, full.narrow(1, i, 1), 1e-5, 1e-5)) << "position " << i;
  }
  EXPECT_EQ(cache.length, 12);
}

TEST(Gpt2, ActivationCheckpointingGivesTheSameGradients) {
  torch::manual_seed(2);
  Gpt2LMHeadModel a(gpt2_odd_shape()), b(gpt2_odd_shape());
  {
    torch::NoGradGuard no_grad;
    auto pa = a.parameters(), pb = b.parameters();
    for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  }
  b.set_activation_checkpointing(true);
  auto tokens = torch::randint(0, 300, {2, 16});
  a.forward(tokens).pow(2).mean().backward();
  b.forward(tokens).pow(2).mean().backward();
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(torch::allclose(pa[i].value().grad(), pb[i].value().grad(), 1e-5, 1e-6))
        << pa[i].key();
}

struct Gpt2Comparison {
  double logits = 1, loss = 1, worst_grad = 1;
  std::string worst_name = "reference failed";
};

// Runs the reference for `cfg` (its own random weights), loads them into ours, and compares.
Gpt2Comparison gpt2_compare(const DecoderConfig& cfg, const std::string& variant) {
  gpulab::testing::TempDir dir("gpt2_" + variant + "_" + cfg.name);
  { std::ofstream(dir.path / "config.json") << cfg.to_json().dump(2); }
  auto r = run_process({testing::torch_python(),
                        std::string(GPULAB_SOURCE_DIR) + "/tests/parity/gpt2_reference.py", "grads",
                        "--config", (dir.path / "config.json").string(), "--out", dir.path.string(),
                        "--batch", "2", "--seq", "24", "--variant", variant});
  EXPECT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  if (!r.ok() || !r->success()) return {};
  auto model = build_causal_lm(cfg);
  auto weights = read_safetensors(dir.path / "weights.safetensors").value().tensors;
  auto st = load_state_dict(*model, weights, "reference weights");
  EXPECT_TRUE(st.ok()) << st.error().message;
  auto in = read_safetensors(dir.path / "input.safetensors").value().tensors;
  auto ref = read_safetensors(dir.path / "reference.safetensors").value().tensors;
  model->train();
  auto logits = model->forward(in.at("inputs"));
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                   in.at("targets").reshape({-1}));
  loss.backward();
  Gpt2Comparison c;
  c.logits = gpulab::test::relative_diff(logits.detach(), ref.at("logits"));
  c.loss = gpulab::test::relative_diff(loss.detach(), ref.at("loss"));
  c.worst_grad = 0;
  for (const auto& p : model->named_parameters()) {
    const auto it = ref.find("grad." + p.key());
    EXPECT_NE(it, ref.end()) << "reference has no gradient for " << p.key();
    if (it == ref.end()) continue;
    const double d = gpulab::test::relative_diff(p.value().grad(), it->second);
    if (d >= c.worst_grad) c.worst_grad = d, c.worst_name = p.key();
  }
  std::printf("%s (%s): logits %.2e, loss %.2e, worst gradient %.2e (%s)\n", cfg.name.c_str(),
              variant.c_str(), c.logits, c.loss, c.worst_grad, c.worst_name.c_str());
  return c;
}

TEST(Gpt2Parity, TiedAndUntiedShapesMatchTheReferenceInFp32) {
  if (testing::torch_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch and numpy");
  DecoderConfig tiny = find_decoder_config("gpt2-tiny").value();
  tiny.vocab_size = 512;  // the reference builds it in a second
  for (const DecoderConfig& cfg : {tiny, gpt2_odd_shape()}) {
    const Gpt2Comparison c = gpt2_compare(cfg, "gpt2");
    EXPECT_LT(c.logits, 1e-4) << cfg.name;
    EXPECT_LT(c.loss, 1e-4) << cfg.name;
    EXPECT_LT(c.worst_grad, 1e-4) << cfg.name << ": worst gradient " << c.worst_name;
  }
  // Negative control: the reference without position embeddings is another model; the same
  // check must flag it, or the check above proves nothing.
  const Gpt2Comparison other = gpt2_compare(gpt2_odd_shape(), "no_positions");
  EXPECT_GT(other.logits, 1e-3);
  EXPECT_GT(other.worst_grad, 1e-3);
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
