// llama-tiny learns the bundled corpus (Debian's fortunes, bytes mode) as PyTorch does: from the
// same initial weights (the reference's, through `gpulab train --init_weights`), on the same
// token windows in the same order (tests/parity/llama_reference.py reproduces
// src/train/data/token_windows.cpp), with AdamW, warm-up + cosine and clipping, the validation
// loss after each epoch is within 2 % of the reference's, and it falls epoch after epoch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/json.h"
#include "core/strings.h"
#include "train/models/decoder_config.h"
#include "train/torchvision_python.h"
#include "train/trainer_test_util.h"

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

// Small enough to run in about a minute on two shared cores (the reference is the slow side):
// 3 epochs of 8 steps, 4 windows of 64 tokens per step; AdamW, warm-up over half an epoch, then
// cosine to zero, gradient norm clipped at 1. The flags mean the same in llama_reference.py.
constexpr int kEpochs = 3, kSteps = 8;
constexpr const char* kRecipe =
    "--seq_len 64 --batch_size 4 --limit_train_batches 8 --num_epochs 3 --learning_rate 3e-3 "
    "--weight_decay 0.1 --warmup_epochs 0.5 --clip_grad 1.0 --seed 3 --threads 2";

TEST(LlamaLearning, ValidationLossMatchesPyTorchOnFortunes) {
  const std::string& py = testing::torch_python();
  if (py.empty()) GTEST_FAIL() << testing::reference_missing("torch and numpy");
  if (!fs::exists(kFortunes / "literature"))
    GTEST_SKIP() << "the bundled corpus is missing: " << kFortunes << " (Debian: fortunes)";
  const fs::path dir = testing::temp_dir("llama_learning");

  std::vector<std::string> tokenize = {
      "data", "tokenize", "--tokenizer", "bytes", "--out", (dir / "data").string(), "--input"};
  for (auto& f : fortune_files()) tokenize.push_back(f);
  auto t = run_gpulab(tokenize);
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;

  // The shape gpulab trains (llama-tiny at the bytes vocabulary), and the reference's weights.
  DecoderConfig cfg = find_decoder_config("llama-tiny").value();
  cfg.vocab_size = 256;
  { std::ofstream(dir / "config.json") << cfg.to_json().dump(2); }
  const std::string script = std::string(GPULAB_SOURCE_DIR) + "/tests/parity/llama_reference.py";
  auto init = run_process({py, script, "init", "--config", (dir / "config.json").string(), "--out",
                           (dir / "init.safetensors").string(), "--seed", "7"});
  ASSERT_TRUE(init.ok() && init->success()) << (init.ok() ? init->err : init.error().message);

  const std::string data = (dir / "data").string(), weights = (dir / "init.safetensors").string();
  auto with_recipe = [&](std::vector<std::string> args) {
    for (auto& flag : split(kRecipe, ' ')) args.push_back(flag);
    return args;
  };
  std::vector<std::string> ours = split(
      "train --model llama-tiny --dataset text --optimizer adamw --lr_schedule cosine --device cpu "
      "--precision fp32 --no_report --no_checkpoints",
      ' ');
  ours.insert(ours.end(), {"--data_dir", data, "--init_weights", weights, "--output_dir",
                           (dir / "run").string()});
  auto g = run_gpulab(with_recipe(ours));
  ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
  std::vector<double> gpulab_val;
  for (const auto& j : testing::epoch_records(dir / "run"))
    gpulab_val.push_back(j.at("test_loss").get<double>());

  // Speed is not compared here: the reference runs under gpulab's OpenMP wait policy
  // (train/thread_env.h), which keeps it from crawling when the machine is shared.
  RunOptions ro;
  ro.timeout = std::chrono::seconds(600);
  ro.env_add = {{"GOMP_SPINCOUNT", "1000"}};
  auto r = run_process(with_recipe({py, script, "train", "--config", (dir / "config.json").string(),
                                    "--weights", weights, "--data_dir", data}),
                       ro);
  ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->err : r.error().message);
  std::vector<double> ref_val;
  for (const auto& j : json_lines(r->out)) ref_val.push_back(j.at("val_loss").get<double>());

  ASSERT_EQ(gpulab_val.size(), static_cast<size_t>(kEpochs)) << g.out;
  ASSERT_EQ(ref_val.size(), static_cast<size_t>(kEpochs)) << r->out;
  for (int e = 0; e < kEpochs; ++e) {
    const double diff = std::abs(gpulab_val[e] - ref_val[e]) / ref_val[e];
    std::cout << fmt::format(
        "epoch {} (step {}): validation loss gpulab {:.6f}, PyTorch {:.6f}, difference {:.2e} %\n",
        e + 1, kSteps * (e + 1), gpulab_val[e], ref_val[e], 100 * diff);
    EXPECT_LT(diff, 0.02) << "epoch " << e + 1;
    // Falls steadily, from ln(256) = 5.55 nats of the initial weights.
    EXPECT_LT(gpulab_val[e], e == 0 ? std::log(256.0) : gpulab_val[e - 1]) << "epoch " << e + 1;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
