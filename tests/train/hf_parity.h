// Parity with Hugging Face transformers' own decoder classes (tests/parity/hf_reference.py): a
// small random LlamaForCausalLM, MistralForCausalLM or GPT2LMHeadModel is written with
// save_pretrained, gpulab reads that folder as `gpulab generate --model DIR` does (config.json,
// model.safetensors), and both compute logits, loss, every gradient and greedy tokens.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "support/tensor_diff.h"
#include "train/generate.h"
#include "train/models/lm_families.h"
#include "train/torchvision_python.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::testing {

// The reference interpreter with transformers (the pinned environment's); empty without it.
inline const std::string& hf_python() {
  static const std::string found = python_with("torch, numpy, transformers, safetensors");
  return found;
}

// Grouped-query, tied, Llama 3's rope_theta (transformers 5 writes it inside rope_parameters).
inline Json llama_gqa() {
  return Json{{"vocab_size", 300},
              {"hidden_size", 96},
              {"intermediate_size", 200},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 6},
              {"num_key_value_heads", 2},
              {"max_position_embeddings", 64},
              {"rope_theta", 500000.0},
              {"rms_norm_eps", 1e-6},
              {"tie_word_embeddings", true},
              {"initializer_range", 0.2},
              {"bos_token_id", 0},
              {"eos_token_id", 0}};
}

struct HfCase {
  std::string family;          // hf_reference.py's --family: llama, mistral, gpt2
  Json kwargs;                 // the config's arguments, transformers' field names
  std::string dtype;           // float64 or float32, on both sides
  std::string variant = "hf";  // another model than the one written: the negative controls
  std::string layout = "lm";   // hub: GPT-2 as the Hugging Face hub's files hold it
};

// The relative differences (tensor_diff.h) of one gpulab attention path against transformers.
struct HfPathResult {
  double logits = 1, loss = 1, worst_grad = 1;
  std::string worst_name = "not compared";
};

struct HfComparison {
  bool ran = false;
  DecoderConfig config;      // as gpulab read transformers' config.json
  HfPathResult fused, sdpa;  // gpulab's CPU kernel; at::scaled_dot_product_attention
  // float64 only: against transformers' model with its RMSNorm kept in float64 (exact.*).
  std::optional<HfPathResult> fused_exact, sdpa_exact;
  double noise_logits = 0, noise_loss = 0, noise_grad = 0;  // the reference against its fp64 self
  std::vector<int64_t> ours, theirs;                        // greedy tokens after the prompt
};

inline std::vector<int64_t> to_ids(const torch::Tensor& t) {
  auto flat = t.reshape({-1}).to(torch::kLong).contiguous();
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

// gpulab's model of the folder transformers wrote, read as `gpulab generate` reads one (tensor
// names through from_hf_names), in the case's dtype (set before loading, so
// float64 weights are not rounded through float32).
inline CausalLmPtr load_hf_folder(const std::filesystem::path& folder, torch::ScalarType dtype,
                                  DecoderConfig& config) {
  auto cfg = find_decoder_config(folder.string());
  EXPECT_TRUE(cfg.ok()) << cfg.error().message;
  if (!cfg.ok()) return nullptr;
  config = *cfg;
  auto file = read_safetensors(folder / "model.safetensors");
  EXPECT_TRUE(file.ok()) << file.error().message;
  if (!file.ok()) return nullptr;
  auto model = build_causal_lm(config);
  model->to(dtype);
  auto st = load_state_dict(*model, from_hf_names(config, std::move(file->tensors)),
                            "transformers' model.safetensors");
  EXPECT_TRUE(st.ok()) << st.error().message;
  return st.ok() ? model : nullptr;
}

// The relative differences of logits, loss and every gradient against ref's `prefix` entries.
inline HfPathResult diffs(CausalLm& model, const torch::Tensor& logits, const torch::Tensor& loss,
                          const StateDict& ref, const std::string& prefix) {
  HfPathResult r;
  r.logits = gpulab::test::relative_diff(logits, ref.at(prefix + "logits"));
  r.loss = gpulab::test::relative_diff(loss, ref.at(prefix + "loss"));
  r.worst_grad = 0;
  for (const auto& p : model.named_parameters()) {
    const auto it = ref.find(prefix + "grad." + p.key());
    EXPECT_NE(it, ref.end()) << "transformers has no parameter " << p.key();
    EXPECT_TRUE(p.value().grad().defined()) << "no gradient for " << p.key();
    if (it == ref.end() || !p.value().grad().defined()) continue;
    const double d = gpulab::test::relative_diff(p.value().grad(), it->second);
    if (d >= r.worst_grad) r.worst_grad = d, r.worst_name = p.key();
  }
  return r;
}

// One forward and backward pass on the reference's tokens: against the reference, and against
// its exact float64 run where there is one.
inline std::pair<HfPathResult, std::optional<HfPathResult>> forward_backward(CausalLm& model,
                                                                             const StateDict& in,
                                                                             const StateDict& ref) {
  model.zero_grad();
  model.train();
  auto logits = model.forward(in.at("inputs"));
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                   in.at("targets").reshape({-1}));
  loss.backward();
  auto result = diffs(model, logits.detach(), loss.detach(), ref, "");
  if (!ref.contains("exact.logits")) return {result, std::nullopt};
  return {result, diffs(model, logits.detach(), loss.detach(), ref, "exact.")};
}

// Runs transformers for `c`, reads its folder into gpulab and compares both attention paths and
// greedy generation. Prints one line of figures per path.
inline HfComparison compare_with_transformers(const HfCase& c, const std::string& tag) {
  HfComparison out;
  gpulab::testing::TempDir dir("hf_" + tag);
  { std::ofstream(dir.path / "kwargs.json") << c.kwargs.dump(); }
  auto r = run_process(
      {hf_python(), std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_reference.py", "grads",
       "--family", c.family, "--config", (dir.path / "kwargs.json").string(), "--out",
       dir.path.string(), "--dtype", c.dtype, "--variant", c.variant, "--layout", c.layout},
      reference_run());
  EXPECT_TRUE(r.ok() && r->success()) << reference_failure(r);
  if (!r.ok() || !r->success()) return out;
  const auto dtype = c.dtype == "float64" ? torch::kDouble : torch::kFloat;
  auto model = load_hf_folder(dir.path / "hf", dtype, out.config);
  if (!model) return out;
  const auto in = read_safetensors(dir.path / "input.safetensors").value().tensors;
  const auto ref = read_safetensors(dir.path / "reference.safetensors").value().tensors;
  model->set_fused_attention(true);
  std::tie(out.fused, out.fused_exact) = forward_backward(*model, in, ref);
  model->set_fused_attention(false);
  std::tie(out.sdpa, out.sdpa_exact) = forward_backward(*model, in, ref);
  out.noise_logits = ref.at("noise.logits").item<double>();
  out.noise_loss = ref.at("noise.loss").item<double>();
  out.noise_grad = ref.at("noise.grad").item<double>();
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = ref.at("generated").numel();
  out.ours = generate(*model, to_ids(in.at("prompt")), greedy);
  out.theirs = to_ids(ref.at("generated"));
  const auto print = [&](const HfPathResult& p, const char* path) {
    std::printf("%s %s %s (%s): logits %.2e, loss %.2e, worst gradient %.2e (%s)\n", tag.c_str(),
                c.dtype.c_str(), c.variant.c_str(), path, p.logits, p.loss, p.worst_grad,
                p.worst_name.c_str());
  };
  print(out.fused, "fused");
  print(out.sdpa, "sdpa");
  if (out.fused_exact) print(*out.fused_exact, "fused, against the exact float64 run");
  if (out.sdpa_exact) print(*out.sdpa_exact, "sdpa, against the exact float64 run");
  std::printf(
      "%s: transformers' own %s rounding: logits %.2e, loss %.2e, gradient %.2e; greedy "
      "tokens %s (%zu)\n",
      tag.c_str(), c.dtype.c_str(), out.noise_logits, out.noise_loss, out.noise_grad,
      out.ours == out.theirs ? "equal" : "differ", out.theirs.size());
  out.ran = true;
  return out;
}

// The tolerance for a quantity the reference computes with rounding `noise` (its distance from
// the same weights in float64 throughout, measured in the same run): gpulab's own rounding in
// the same dtype is of the same size but in another order, so 10x; never below 1e-10, which is
// float64 rounding (2^-53 = 1.1e-16 per operation) grown by sums of a few hundred terms over a
// few blocks, with a margin of 10^4 (seen: <= 1e-14 where neither side rounds through float32).
inline double hf_tolerance(double noise) {
  return std::max(10 * noise, 1e-10);
}

// Both attention paths within the tolerances, and, with `tokens`, the same greedy tokens.
inline void expect_hf_parity(const HfComparison& c, const std::string& what, bool tokens) {
  ASSERT_TRUE(c.ran) << what;
  for (const auto* r : {&c.fused, &c.sdpa}) {
    const std::string path = what + (r == &c.fused ? " (fused)" : " (sdpa)");
    EXPECT_LT(r->logits, hf_tolerance(c.noise_logits)) << path;
    EXPECT_LT(r->loss, hf_tolerance(c.noise_loss)) << path;
    EXPECT_LT(r->worst_grad, hf_tolerance(c.noise_grad))
        << path << ": worst gradient " << r->worst_name;
  }
  // In float64, gpulab against transformers' own model with no float32 step: float64's bound.
  for (const auto& r : {c.fused_exact, c.sdpa_exact}) {
    if (!r) continue;
    EXPECT_LT(r->logits, hf_tolerance(0)) << what << " (exact float64)";
    EXPECT_LT(r->loss, hf_tolerance(0)) << what << " (exact float64)";
    EXPECT_LT(r->worst_grad, hf_tolerance(0))
        << what << " (exact float64): worst gradient " << r->worst_name;
  }
  if (tokens) {
    EXPECT_EQ(c.ours, c.theirs) << what << ": greedy tokens differ from generate()";
  }
}

// A deliberately different model: every path must fail by far more than any tolerance (the
// parity tolerances are at most 1e-4 in float32, so 1e-3 is 10x above the largest of them).
inline void expect_hf_mismatch(const HfComparison& c, const std::string& what) {
  ASSERT_TRUE(c.ran) << what;
  for (const auto* r : {&c.fused, &c.sdpa}) {
    EXPECT_GT(r->logits, 1e-3) << what;
    EXPECT_GT(r->worst_grad, 1e-3) << what;
  }
  EXPECT_NE(c.ours, c.theirs) << what;
}

}  // namespace gpulab::train::testing
