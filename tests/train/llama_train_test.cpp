// Language models through `gpulab train` and `gpulab generate` (the built CLI, real processes):
// llama-tiny learns the synthetic token stream, the log line carries tokens/s, TFLOPS and MFU,
// the weights generate text (a resumed run continuing bit for bit is every family's FamilyTrain),
// and bad input (too long a sequence, a config.json missing fields, a vocabulary smaller than the
// data's, --init_weights missing or of another shape); each step's loss in the log is one clear
// line, exit 2, nothing written. Also FusedAdamW against libtorch's AdamW.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "core/files.h"
#include "core/json.h"
#include "train/optim/fused_adamw.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

using testing::run_gpulab;
using testing::temp_dir;
namespace fs = std::filesystem;

// Sets --flag's value in a command line.
void set_flag(std::vector<std::string>& args, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) args[i + 1] = value;
}

std::vector<std::string> tiny_run(const fs::path& out, int epochs) {
  return {"train",
          "--model",
          "llama-tiny",
          "--dataset",
          "synthetic-text",
          "--seq_len",
          "64",
          "--batch_size",
          "8",
          "--optimizer",
          "adamw",
          "--learning_rate",
          "3e-3",
          "--weight_decay",
          "0.1",
          "--lr_schedule",
          "cosine",
          "--warmup_epochs",
          "0.5",
          "--clip_grad",
          "1.0",
          "--num_epochs",
          std::to_string(epochs),
          "--limit_train_batches",
          "12",
          "--device",
          "cpu",
          "--precision",
          "fp32",
          "--threads",
          "2",
          "--output_dir",
          out.string(),
          "--no_report"};
}

TEST(LlamaTrain, TinyLearnsAndLogsThroughput) {
  const fs::path out = temp_dir("llama_learn");
  auto r = run_gpulab(tiny_run(out, 3));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tok/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MFU"), std::string::npos) << r.out;
  const auto epochs = testing::epoch_records(out);
  ASSERT_EQ(epochs.size(), 3u);
  // Validation loss falls steadily from ln(256) = 5.55 towards the stream's ~1.9 nats.
  const double v0 = epochs[0]["test_loss"], v2 = epochs[2]["test_loss"];
  EXPECT_LT(v2, v0);
  EXPECT_LT(v2, 4.5) << "validation loss after 36 steps";
  EXPECT_GT(epochs[2]["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(epochs[2]["tflops_per_device"].get<double>(), 0);
  EXPECT_GT(epochs[2]["mfu"].get<double>(), 0);
  EXPECT_GT(epochs[2]["peak_host_memory_bytes"].get<double>(), 0);
  // One "step" record an optimizer step with its training loss; an epoch's steps (equal batches)
  // average to the epoch's train_loss. Both sum the same fp32 losses in other orders (the epoch
  // on the device in fp32, the steps in fp64): 12 terms of ~4 differ by a few fp32 ulps, 1e-6.
  std::ifstream log(out / "metrics.jsonl");
  std::map<int64_t, double> step_loss;
  for (std::string line; std::getline(log, line);)
    if (auto j = Json::parse(line); j.value("type", "") == "step")
      step_loss[j.at("step").get<int64_t>()] = j.at("loss").get<double>();
  ASSERT_EQ(step_loss.size(), 36u);
  for (int e = 0; e < 3; ++e) {
    double sum = 0;
    for (int s = e * 12 + 1; s <= e * 12 + 12; ++s) sum += step_loss.at(s);
    EXPECT_NEAR(sum / 12, epochs[e]["train_loss"].get<double>(), 1e-6 * (sum / 12)) << e;
  }
  EXPECT_GT(step_loss.at(1), step_loss.at(36));  // it learns
  ASSERT_TRUE(fs::exists(out / "config.json"));
  // The weights generate: greedy is deterministic, and the learnt rule shows in it.
  auto g = run_gpulab({"generate", "--model", out.string(), "--weights",
                       (out / "model.safetensors").string(), "--prompt", "ab", "--max_new_tokens",
                       "8", "--temperature", "0"});
  ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
  EXPECT_GE(g.out.size(), 10u);
  fs::remove_all(out);
}

// A resume that would be another run is refused: the flag named with both values, exit 2, and
// the run folder as it was (metrics.jsonl, checkpoints). A cosine run given more epochs is
// refused too (its schedule spans the planned epochs); the same flags resume.
TEST(LlamaTrain, ResumeRefusesAChangedMeaning) {
  const fs::path out = temp_dir("llama_resume_meaning");
  auto first = tiny_run(out, 1);
  set_flag(first, "--limit_train_batches", "2");
  ASSERT_EQ(run_gpulab(first).exit_code, 0);
  const auto log = read_file(out / "metrics.jsonl").value();
  const auto refused = [&](const std::string& flag, const std::string& value,
                           const std::string& words) {
    auto args = first;
    set_flag(args, flag, value);
    args.insert(args.end(), {"--resume", "auto"});
    auto r = run_gpulab(args);
    EXPECT_EQ(r.exit_code, 2) << flag << r.out << r.err;
    EXPECT_NE(r.err.find(flag + " " + value + " differs from the run being resumed"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--output_dir"), std::string::npos) << "no way to a new run: " << r.err;
    EXPECT_EQ(read_file(out / "metrics.jsonl").value(), log) << flag << ": the run was written";
  };
  refused("--seq_len", "32", "(seq_len 64 in ");
  refused("--batch_size", "4", "(batch_size 8 in ");
  refused("--num_epochs", "2", "cosine learning-rate schedule");
  auto same = first;
  same.insert(same.end(), {"--resume", "auto"});
  auto r = run_gpulab(same);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Nothing to train"), std::string::npos) << r.out;
  fs::remove_all(out);
}

// bfloat16 autocast on the CPU (4 s a step there without bf16 instructions): two steps train,
// with a finite loss, and the header says what ran.
TEST(LlamaTrain, Bf16AutocastTrains) {
  const fs::path out = temp_dir("llama_bf16");
  auto args = tiny_run(out, 1);
  set_flag(args, "--precision", "bf16");
  set_flag(args, "--limit_train_batches", "2");
  args.insert(args.end(), {"--limit_eval_batches", "1"});
  auto r = run_gpulab(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Precision: bf16"), std::string::npos) << r.out;
  const auto epochs = testing::epoch_records(out);
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_TRUE(std::isfinite(epochs[0]["train_loss"].get<double>()));
  EXPECT_LT(epochs[0]["train_loss"].get<double>(), 6.0);
  fs::remove_all(out);
}

// One line, exit 2, and no run folder.
void expect_refused(const std::vector<std::string>& args, const fs::path& out,
                    const std::string& says) {
  auto r = run_gpulab(args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out)) << "bad input wrote " << out;
}

TEST(LlamaTrain, BadInputIsOneLineExit2NothingWritten) {
  const fs::path dir = temp_dir("llama_bad");
  const fs::path out = dir / "run";
  auto args = tiny_run(out, 1);
  set_flag(args, "--seq_len", "2048");
  expect_refused(args, out, "beyond");

  Json cfg = {{"hidden_size", 64}, {"num_attention_heads", 4}, {"vocab_size", 300}};
  std::ofstream(dir / "config.json") << cfg.dump();
  args = tiny_run(out, 1);
  args[2] = (dir / "config.json").string();
  expect_refused(args, out, "num_hidden_layers");

  cfg = {{"hidden_size", 64},       {"num_attention_heads", 4}, {"num_hidden_layers", 2},
         {"intermediate_size", 96}, {"vocab_size", 100},        {"max_position_embeddings", 128},
         {"rms_norm_eps", 1e-5}};
  std::ofstream(dir / "config.json") << cfg.dump();
  expect_refused(args, out, "vocabulary");

  // Starting weights that are missing, or of another shape.
  args = tiny_run(out, 1);
  args.insert(args.end(), {"--init_weights", (dir / "none.safetensors").string()});
  expect_refused(args, out, "--init_weights");
  ASSERT_TRUE(write_safetensors(dir / "other.safetensors",
                                {{"model.embed_tokens.weight", torch::zeros({256, 8})}})
                  .ok());
  args.back() = (dir / "other.safetensors").string();
  expect_refused(args, out, "--init_weights");
  fs::remove_all(dir);
}

TEST(FusedAdamW, MatchesLibtorchAdamW) {
  torch::manual_seed(3);
  auto p1 = torch::randn({37, 19}).requires_grad_(), p2 = p1.detach().clone().requires_grad_();
  auto opts = torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
  torch::optim::AdamW ref({p1}, opts);
  FusedAdamW ours({p2}, opts);
  for (int step = 0; step < 5; ++step) {
    auto g = torch::randn({37, 19});
    p1.mutable_grad() = g.clone();
    p2.mutable_grad() = g.clone();
    ref.step();
    ours.step();
  }
  EXPECT_EQ(ours.fused_params(), 1);
  // float32, five steps of a few roundings each in another order: measured 3.7e-8 of the
  // largest weight (3.2). A missing bias correction or decoupled decay moves weights by 1e-3.
  EXPECT_TRUE(torch::allclose(p1, p2, 1e-5, 1e-6)) << (p1 - p2).abs().max();
}

}  // namespace
}  // namespace gpulab::train
