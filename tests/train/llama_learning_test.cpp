// llama-tiny learns the bundled corpus (Debian's fortunes, bytes mode) as PyTorch does: from the
// same initial weights (the reference's, through `gpulab train --init_weights`), on the same
// token windows in the same order (tests/parity/llama_reference.py reproduces
// src/train/data/token_windows.cpp), with AdamW, warm-up + cosine and clipping, both in float64:
// the final weights agree tensor by tensor and the validation loss after each epoch agrees, both
// within 1e-9, and the loss falls epoch after epoch. A control swaps two steps' windows in the
// reference and must be caught.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/json.h"
#include "core/strings.h"
#include "support/tensor_diff.h"
#include "train/models/decoder_config.h"
#include "train/torchvision_python.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;
using testing::run_gpulab;

const fs::path kFortunes = "/usr/share/games/fortunes";

// The corpus files scripts/make-llm-data.sh tokenizes: every English fortune file (no .dat
// index or .u8 link), ascii-art excluded, in a fixed order.
std::vector<std::string> fortune_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kFortunes)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.find('.') == std::string::npos && name != "ascii-art")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Json> json_lines(const std::string& text) {
  std::vector<Json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.front() == '{') out.push_back(Json::parse(line));
  return out;
}

// Float64 on both sides, the same order, initial weights and optimizer: what is left is the
// rounding of sums the two order differently (2^-53 = 1.1e-16 a term), carried through 24 AdamW
// steps. Measured: 2.4e-13 at worst (mlp.down_proj of layer 0), validation losses alike to
// ~1e-15. 1e-9 leaves 4000x that; two steps trained on each other's windows move the weights by
// 0.14 (the control).
constexpr double kLearningTolerance = 1e-9;

// The corpus tokenized, llama-tiny's config at the bytes vocabulary and the reference's initial
// weights, in `dir`; the interpreter that runs the reference.
struct LearningSetup {
  fs::path dir;
  std::string py, script, data, weights, config;

  void prepare(const std::string& name) {
    py = testing::torch_python();
    if (py.empty()) GTEST_FAIL() << testing::reference_missing("torch and numpy");
    if (!fs::exists(kFortunes / "literature"))
      GTEST_SKIP() << "the bundled corpus is missing: " << kFortunes << " (Debian: fortunes)";
    dir = testing::temp_dir(name);
    data = (dir / "data").string(), weights = (dir / "init.safetensors").string();
    config = (dir / "config.json").string();
    std::vector<std::string> tokenize = {"data",  "tokenize", "--tokenizer", "bytes",
                                         "--out", data,       "--input"};
    for (auto& f : fortune_files()) tokenize.push_back(f);
    auto t = run_gpulab(tokenize);
    ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
    DecoderConfig cfg = find_decoder_config("llama-tiny").value();
    cfg.vocab_size = 256;
    { std::ofstream(config) << cfg.to_json().dump(2); }
    script = std::string(GPULAB_SOURCE_DIR) + "/tests/parity/llama_reference.py";
    auto init =
        run_process({py, script, "init", "--config", config, "--out", weights, "--seed", "7"},
                    testing::reference_run());
    ASSERT_TRUE(init.ok() && init->success()) << (init.ok() ? init->err : init.error().message);
  }

  // gpulab trains `recipe` in float64 into dir/run; its validation loss per epoch.
  std::vector<double> train_ours(const std::string& recipe) {
    std::vector<std::string> args = split(
        "train --model llama-tiny --dataset text --optimizer adamw --lr_schedule cosine "
        "--device cpu --precision fp64 --no_report --no_checkpoints " +
            recipe,
        ' ');
    args.insert(args.end(), {"--data_dir", data, "--init_weights", weights, "--output_dir",
                             (dir / "run").string()});
    auto g = run_gpulab(args);
    EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
    std::vector<double> val;
    for (const auto& j : testing::epoch_records(dir / "run"))
      val.push_back(j.at("test_loss").get<double>());
    return val;
  }

  // The reference trains `recipe` (--double) into dir/`out`; its validation loss per epoch.
  std::vector<double> train_reference(const std::string& recipe, const std::string& out,
                                      const std::vector<std::string>& extra = {}) {
    // Speed is not compared here: the reference runs under gpulab's OpenMP wait policy
    // (train/thread_env.h), which keeps it from crawling when the machine is shared.
    RunOptions ro;
    ro.timeout = std::chrono::seconds(600);
    ro.env_add = {{"GOMP_SPINCOUNT", "1000"}};
    std::vector<std::string> args = {py,     script,      "train", "--config",
                                     config, "--weights", weights, "--data_dir",
                                     data,   "--double",  "--out", (dir / out).string()};
    for (auto& flag : split(recipe, ' ')) args.push_back(flag);
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_process(args, ro);
    EXPECT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
    std::vector<double> val;
    if (r.ok())
      for (const auto& j : json_lines(r->out)) val.push_back(j.at("val_loss").get<double>());
    return val;
  }

  // The largest per-tensor relative difference of gpulab's final weights from `ref` (and its
  // tensor's name); every tensor of either side must be in both.
  std::pair<double, std::string> weights_diff(const std::string& ref) {
    auto ours = read_safetensors(dir / "run" / "model.safetensors");
    auto theirs = read_safetensors(dir / ref);
    EXPECT_TRUE(ours.ok() && theirs.ok());
    if (!ours.ok() || !theirs.ok()) return {1, "unreadable"};
    EXPECT_EQ(ours->tensors.size(), theirs->tensors.size());
    std::pair<double, std::string> worst{0, ""};
    for (const auto& [name, t] : theirs->tensors) {
      auto it = ours->tensors.find(name);
      EXPECT_NE(it, ours->tensors.end()) << name << " is not in gpulab's weights";
      if (it == ours->tensors.end()) continue;
      const double rel = gpulab::test::relative_diff(it->second, t);
      if (rel >= worst.first) worst = {rel, name};
    }
    return worst;
  }
};

// Small enough to run in about 30 s on two shared cores (31 s measured; the reference is the
// slow side): 3 epochs of 8 steps, 4 windows of 64 tokens per step; AdamW, warm-up over half an
// epoch, then cosine to zero, gradient norm clipped at 1. The flags mean the same in
// llama_reference.py.
constexpr int kLearningEpochs = 3, kLearningSteps = 8;
constexpr const char* kLearningRecipe =
    "--seq_len 64 --batch_size 4 --limit_train_batches 8 --num_epochs 3 --learning_rate 3e-3 "
    "--weight_decay 0.1 --warmup_epochs 0.5 --clip_grad 1.0 --seed 3 --threads 2";

TEST(LlamaLearning, WeightsAndValidationLossMatchPyTorchOnFortunes) {
  LearningSetup s;
  ASSERT_NO_FATAL_FAILURE(s.prepare("llama_learning"));
  if (::testing::Test::IsSkipped()) return;
  const std::vector<double> ours = s.train_ours(kLearningRecipe);
  const std::vector<double> ref = s.train_reference(kLearningRecipe, "ref.safetensors");
  ASSERT_EQ(ours.size(), static_cast<size_t>(kLearningEpochs));
  ASSERT_EQ(ref.size(), static_cast<size_t>(kLearningEpochs));
  for (int e = 0; e < kLearningEpochs; ++e) {
    const double diff = std::abs(ours[e] - ref[e]) / ref[e];
    std::cout << fmt::format(
        "epoch {} (step {}): validation loss gpulab {:.9f}, PyTorch {:.9f}, relative {:.2e}\n",
        e + 1, kLearningSteps * (e + 1), ours[e], ref[e], diff);
    EXPECT_LT(diff, kLearningTolerance) << "epoch " << e + 1;
    // Falls steadily, from ln(256) = 5.55 nats of the initial weights.
    EXPECT_LT(ours[e], e == 0 ? std::log(256.0) : ours[e - 1]) << "epoch " << e + 1;
  }
  const auto [worst, name] = s.weights_diff("ref.safetensors");
  std::cout << fmt::format("final weights: largest relative difference {:.3g} ({})\n", worst, name);
  EXPECT_LT(worst, kLearningTolerance) << name;
  fs::remove_all(s.dir);
}

// The comparison above can see an order bug: over 2 steps the reference ends within
// kLearningTolerance of gpulab, and with steps 0 and 1 trained on each other's windows (the rest
// alike) outside it.
TEST(LlamaLearningControl, TwoSwappedWindowsAreCaught) {
  LearningSetup s;
  ASSERT_NO_FATAL_FAILURE(s.prepare("llama_learning_control"));
  if (::testing::Test::IsSkipped()) return;
  const std::string recipe =
      "--seq_len 64 --batch_size 4 --limit_train_batches 2 --num_epochs 1 --learning_rate 3e-3 "
      "--weight_decay 0.1 --warmup_epochs 0.5 --clip_grad 1.0 --seed 3 --threads 2";
  ASSERT_EQ(s.train_ours(recipe + " --limit_eval_batches 1").size(), 1u);
  s.train_reference(recipe, "straight.safetensors");
  s.train_reference(recipe, "swapped.safetensors", {"--swap_windows"});
  const auto straight = s.weights_diff("straight.safetensors");
  const auto swapped = s.weights_diff("swapped.safetensors");
  std::cout << fmt::format(
      "2 steps: largest relative difference {:.3g} ({}); windows of steps 0 and 1 swapped in the "
      "reference: {:.3g} ({})\n",
      straight.first, straight.second, swapped.first, swapped.second);
  EXPECT_LT(straight.first, kLearningTolerance) << straight.second;
  EXPECT_GT(swapped.first, kLearningTolerance) << swapped.second;
  fs::remove_all(s.dir);
}

}  // namespace
}  // namespace gpulab::train
