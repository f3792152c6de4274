// `gpulab train --tp` end to end (the built CLI, real ranks over Gloo, fp64, llama-tiny): TP 2
// equals one process step for step and in its final weights; TP 2 x DP 2 on 4 ranks equals DP 2;
// a run saved at TP 2 resumes at TP 1 and the reverse, equal to the uninterrupted run, its
// checkpoint the gathered model bit for bit; each bad layout is refused in the launching process
// (exit 2, the numbers named, nothing written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "train/checkpoint.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

using testing::run_gpulab;
using testing::temp_dir;
namespace fs = std::filesystem;

// Tolerance: both runs compute the same fp64 sums in another order (a row-parallel product
// adds two half-sums, the vocabulary-parallel loss sums exponentials per rank before the
// all-reduce), each off by at most a few ulps (2.2e-16 relative) per reduction; the library's own
// TP test sees 3e-15 on the loss and every gradient of one step. Five Adam steps at lr 3e-3 carry
// such differences along without growing them by orders of magnitude (the update m / sqrt(v) is
// a ratio of the same sums), so 1e-12 is a thousand-fold margin, while any real difference (a
// missing gradient sum, a wrong shard, the other data) shows at 1e-3 or more.
constexpr double kTol = 1e-12;

std::vector<std::string> tiny_run(const fs::path& out, int epochs) {
  return {"train",          "--model",         "llama-tiny",    "--dataset",
          "synthetic-text", "--seq_len",       "16",            "--batch_size",
          "4",              "--optimizer",     "adamw",         "--learning_rate",
          "3e-3",           "--weight_decay",  "0.1",           "--lr_schedule",
          "none",           "--clip_grad",     "1.0",           "--num_epochs",
          std::to_string(epochs), "--limit_train_batches", "1", "--limit_eval_batches",
          "1",              "--device",        "cpu",           "--precision",
          "fp64",           "--threads",       "1",             "--backend",
          "gloo",           "--output_dir",    out.string(),    "--no_report"};
}

std::vector<std::string> with(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void run_ok(const std::vector<std::string>& args) {
  auto r = run_gpulab(args, 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
}

double rel(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300});
}

// Each epoch (one step each here) has the same train and test loss within kTol.
void expect_same_losses(const fs::path& a, const fs::path& b, size_t epochs) {
  const auto ea = testing::epoch_records(a), eb = testing::epoch_records(b);
  ASSERT_EQ(ea.size(), epochs);
  ASSERT_EQ(eb.size(), epochs);
  for (size_t i = 0; i < epochs; ++i) {
    for (const char* key : {"train_loss", "test_loss"}) {
      const double x = ea[i][key], y = eb[i][key];
      EXPECT_LT(rel(x, y), kTol) << key << " of epoch " << i + 1 << ": " << x << " vs " << y;
    }
  }
}

// Every tensor of the two exports within kTol of its largest element.
void expect_same_weights(const fs::path& a, const fs::path& b) {
  auto wa = read_safetensors(a / "model.safetensors").value().tensors;
  auto wb = read_safetensors(b / "model.safetensors").value().tensors;
  ASSERT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (const auto& [name, t] : wa) {
    ASSERT_TRUE(wb.count(name)) << name;
    ASSERT_EQ(t.sizes(), wb.at(name).sizes()) << name;
    const double scale = std::max(t.abs().max().item<double>(), 1e-300);
    worst = std::max(worst, (t - wb.at(name)).abs().max().item<double>() / scale);
  }
  EXPECT_LT(worst, kTol);
  std::printf("largest relative weight difference: %.3g\n", worst);
}

TEST(TpTrainCli, Tp2EqualsOneProcess) {
  const fs::path one = temp_dir("tp_one"), tp = temp_dir("tp_tp2");
  run_ok(tiny_run(one, 5));
  auto r = run_gpulab(with(tiny_run(tp, 5), {"--tp", "2", "--nproc_per_node", "2"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Tensor parallel: 2 ranks per model replica (sequence parallel on), data "
                       "parallel 1"),
            std::string::npos)
      << r.out;
  // Reported once: rank 0 alone prints the run's lines.
  const auto first = r.out.find("Training took");
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Training took", first + 1), std::string::npos) << r.out;
  expect_same_losses(one, tp, 5);
  expect_same_weights(one, tp);
  fs::remove_all(one);
  fs::remove_all(tp);
}

TEST(TpTrainCli, Tp2TimesDp2EqualsDp2) {
  const fs::path dp = temp_dir("tp_dp2"), mesh = temp_dir("tp_mesh");
  run_ok(with(tiny_run(dp, 5), {"--nproc_per_node", "2"}));
  run_ok(with(tiny_run(mesh, 5),
              {"--tp", "2", "--nproc_per_node", "4", "--sequence_parallel", "off"}));
  expect_same_losses(dp, mesh, 5);
  expect_same_weights(dp, mesh);
  fs::remove_all(dp);
  fs::remove_all(mesh);
}

// The newest checkpoint's model tensors (the ordinary layout, whatever the run's TP size).
StateDict newest_checkpoint_weights(const fs::path& run) {
  auto ckpt = find_resumable(run / "checkpoints");
  EXPECT_TRUE(ckpt.has_value());
  if (!ckpt) return {};
  return read_checkpoint_weights(*ckpt).value().tensors;
}

// Saved at one TP size after 3 of 5 epochs, resumed at another: the same run as one process
// straight through (a constant learning rate: the schedule does not depend on the epochs).
TEST(TpTrainCli, CheckpointsResumeAtAnotherTpSize) {
  const fs::path straight = temp_dir("tp_straight"), a = temp_dir("tp_save2"),
                 b = temp_dir("tp_save1");
  const std::vector<std::string> tp2 = {"--tp", "2", "--nproc_per_node", "2"};
  run_ok(tiny_run(straight, 5));
  // TP 2 -> TP 1. The checkpoint holds the gathered model, bit for bit what the run exported.
  run_ok(with(tiny_run(a, 3), tp2));
  const auto exported = read_safetensors(a / "model.safetensors").value().tensors;
  const auto saved = newest_checkpoint_weights(a);
  ASSERT_EQ(saved.size(), exported.size());
  for (const auto& [name, t] : exported)
    EXPECT_TRUE(saved.count(name) && torch::equal(saved.at(name), t)) << name;
  run_ok(with(tiny_run(a, 5), {"--resume", "auto"}));
  expect_same_losses(straight, a, 5);
  expect_same_weights(straight, a);
  // TP 1 -> TP 2.
  run_ok(tiny_run(b, 3));
  run_ok(with(tiny_run(b, 5), {"--resume", "auto", "--tp", "2", "--nproc_per_node", "2"}));
  expect_same_losses(straight, b, 5);
  expect_same_weights(straight, b);
  fs::remove_all(straight);
  fs::remove_all(a);
  fs::remove_all(b);
}

// Refused before any rank starts: exit 2, the message, no run folder.
void expect_refused(std::vector<std::string> more, const std::string& says,
                    const std::string& hint) {
  const fs::path dir = temp_dir("tp_bad");
  const fs::path out = dir / "run";
  auto r = run_gpulab(with(tiny_run(out, 1), std::move(more)));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Hello from"), std::string::npos) << "a rank started: " << r.out;
  EXPECT_FALSE(fs::exists(out)) << "bad input wrote " << out;
  fs::remove_all(dir);
}

TEST(TpTrainCli, BadLayoutsAreRefusedBeforeAnyRank) {
  // llama-tiny: 8 query and 8 kv heads, FFN 688.
  expect_refused({"--tp", "3", "--nproc_per_node", "3"},
                 "tensor-parallel size 3 does not fit llama-tiny", "use --tp 2");
  expect_refused({"--tp", "2", "--nproc_per_node", "3"}, "does not divide the world size 3",
                 "--tp 1");
  expect_refused({"--tp", "2", "--nproc_per_node", "1", "--nnodes", "2", "--master_addr",
                  "127.0.0.1", "--node_rank", "0"},
                 "--tp 2 spans nodes: 1 ranks per node on 2 nodes", "--allow_tp_across_nodes");
  expect_refused({"--tp", "2", "--nproc_per_node", "2", "--model", "gpt2-tiny"},
                 "the gpt2 family (gpt2-tiny) has no tensor-parallel model", "llama, qwen2");
  expect_refused({"--tp", "2", "--nproc_per_node", "2", "--seq_len", "15"},
                 "--seq_len 15 does not split over --tp 2", "--seq_len 16");
  expect_refused({"--pp", "2", "--nproc_per_node", "2"},
                 "pipeline parallelism is not wired into train yet", "--pp 1");
  expect_refused({"--tp", "2", "--nproc_per_node", "2", "--shard", "full"}, "--shard full",
                 "drop --shard");
  expect_refused({"--tp", "2", "--nproc_per_node", "2", "--activation_checkpointing"},
                 "--activation_checkpointing", "drop --activation_checkpointing");
}

}  // namespace
}  // namespace gpulab::train
