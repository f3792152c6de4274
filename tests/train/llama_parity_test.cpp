// The Llama decoder against an independent PyTorch implementation (tests/parity/
// llama_reference.py, Debian's python3-torch): the same weights (moved over as safetensors under
// Hugging Face's names) and tokens give the same logits, loss and every gradient within 1e-4 of
// the reference's scale in fp32, for llama-tiny's shape and a grouped-query one; a reference
// with the other rotary layout shows the check can fail.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "support/tensor_diff.h"
#include "train/models/llama.h"
#include "train/torchvision_python.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;
using testing::reference_missing;
using testing::torch_python;

using gpulab::testing::TempDir;

struct Comparison {
  double logits = 0, loss = 0, worst_grad = 0;
  std::string worst_name;
};

// Runs the reference for `cfg`, loads its weights into our model, and compares.
Comparison compare(const DecoderConfig& cfg, const std::string& rope, const std::string& tag) {
  TempDir dir(tag);
  { std::ofstream(dir.path / "config.json") << cfg.to_json().dump(2); }
  auto r = run_process({torch_python(),
                        std::string(GPULAB_SOURCE_DIR) + "/tests/parity/llama_reference.py",
                        "grads", "--config", (dir.path / "config.json").string(), "--out",
                        dir.path.string(), "--batch", "2", "--seq", "24", "--rope", rope});
  EXPECT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  if (!r.ok() || !r->success()) return {1, 1, 1, "reference failed"};

  LlamaForCausalLM model(cfg);
  auto weights = read_safetensors(dir.path / "weights.safetensors").value().tensors;
  auto st = load_state_dict(model, weights, "reference weights");
  EXPECT_TRUE(st.ok()) << st.error().message;
  auto in = read_safetensors(dir.path / "input.safetensors").value().tensors;
  auto ref = read_safetensors(dir.path / "reference.safetensors").value().tensors;

  model.train();
  auto logits = model.forward(in.at("inputs"));
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                   in.at("targets").reshape({-1}));
  loss.backward();
  Comparison c;
  c.logits = gpulab::test::relative_diff(logits.detach(), ref.at("logits"));
  c.loss = gpulab::test::relative_diff(loss.detach(), ref.at("loss"));
  for (const auto& p : model.named_parameters()) {
    const auto it = ref.find("grad." + p.key());
    EXPECT_NE(it, ref.end()) << "reference has no gradient for " << p.key();
    if (it == ref.end()) continue;
    const double d = gpulab::test::relative_diff(p.value().grad(), it->second);
    if (d >= c.worst_grad) c.worst_grad = d, c.worst_name = p.key();
  }
  return c;
}

DecoderConfig tiny_for_test() {
  DecoderConfig c = find_decoder_config("llama-tiny").value();
  c.vocab_size = 512;  // the reference builds it in a second
  return c;
}

DecoderConfig gqa_config() {
  DecoderConfig c;
  c.name = "gqa-test";
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 200;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.max_positions = 64;
  c.rope_theta = 500000;
  c.norm_eps = 1e-6;
  c.tie_word_embeddings = true;
  return c;
}

#define REQUIRE_TORCH() \
  if (torch_python().empty()) GTEST_FAIL() << reference_missing("torch and numpy")

TEST(LlamaParity, TinyMatchesReferenceInFp32) {
  REQUIRE_TORCH();
  const Comparison c = compare(tiny_for_test(), "half", "tiny");
  EXPECT_LT(c.logits, 1e-4);
  EXPECT_LT(c.loss, 1e-4);
  EXPECT_LT(c.worst_grad, 1e-4) << "worst gradient: " << c.worst_name;
  std::printf("llama-tiny: logits %.2e, loss %.2e, worst gradient %.2e (%s)\n", c.logits, c.loss,
              c.worst_grad, c.worst_name.c_str());
}

TEST(LlamaParity, GroupedQueryTiedMatchesReferenceInFp32) {
  REQUIRE_TORCH();
  const Comparison c = compare(gqa_config(), "half", "gqa");
  EXPECT_LT(c.logits, 1e-4);
  EXPECT_LT(c.loss, 1e-4);
  EXPECT_LT(c.worst_grad, 1e-4) << "worst gradient: " << c.worst_name;
  std::printf("gqa: logits %.2e, loss %.2e, worst gradient %.2e (%s)\n", c.logits, c.loss,
              c.worst_grad, c.worst_name.c_str());
}

// Negative control: the interleaved rotary layout is a different model; the same check must
// flag it, or the checks above prove nothing.
TEST(LlamaParity, OtherRotaryLayoutFailsTheCheck) {
  REQUIRE_TORCH();
  const Comparison c = compare(gqa_config(), "interleaved", "neg");
  EXPECT_GT(c.logits, 1e-3);
  EXPECT_GT(c.worst_grad, 1e-3);
}

}  // namespace
}  // namespace gpulab::train
