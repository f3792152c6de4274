// `gpulab train --tp` end to end (the built CLI, real ranks over Gloo, fp64, llama-tiny): TP 2
// equals one process step for step and in its final weights, also with activation checkpointing
// and with label smoothing; TP 2 x DP 2 on 4 ranks equals DP 2, and with ZeRO-3 over the
// data-parallel pair equals one process; bf16 tracks fp32 within bf16's own noise; a run saved
// at TP 2 resumes at TP 1 and the reverse (and at TP 2 x DP 2 ZeRO-3 and TP 1 x DP 2), equal to
// the uninterrupted run, its checkpoint the gathered model bit for bit; each bad layout is
// refused in the launching process (exit 2, the numbers named, nothing written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/files.h"
#include "core/json.h"
#include "train/checkpoint.h"
#include "train/parallel/train_cli_compare.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

using testing::expect_export_is_checkpoint;
using testing::expect_refused;
using testing::expect_same_weights;
using testing::newest_checkpoint_weights;
using testing::rel;
using testing::run_gpulab;
using testing::run_ok;
using testing::set_flag;
using testing::temp_dir;
using testing::tiny_run;
using testing::with;
namespace fs = std::filesystem;

// The tolerances and why (the same sums in another order; Adam's eps): train_cli_compare.h.
using testing::kAdamTol;
using testing::kFloatUlp;
using testing::kTol;

// Each epoch (one step each here) has the same validation loss within kTol and the same
// training loss within a float ulp (the defaults).
using testing::expect_same_losses;

TEST(TpTrainCli, Tp2EqualsOneProcess) {
  const fs::path one = temp_dir("tp_one"), tp = temp_dir("tp_tp2");
  run_ok(with(tiny_run(one, 5), {"--no_checkpoints"}));
  auto r = run_gpulab(
      with(tiny_run(tp, 5), {"--no_checkpoints", "--tp", "2", "--nproc_per_node", "2"}), 600);
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
  expect_same_weights(one, tp, kTol);
  fs::remove_all(one);
  fs::remove_all(tp);
}

TEST(TpTrainCli, Tp2TimesDp2EqualsDp2) {
  const fs::path dp = temp_dir("tp_dp2"), mesh = temp_dir("tp_mesh");
  run_ok(with(tiny_run(dp, 5), {"--no_checkpoints", "--nproc_per_node", "2"}));
  run_ok(with(tiny_run(mesh, 5), {"--no_checkpoints", "--tp", "2", "--nproc_per_node", "4",
                                  "--sequence_parallel", "off"}));
  expect_same_losses(dp, mesh, 5);
  expect_same_weights(dp, mesh, kTol);
  fs::remove_all(dp);
  fs::remove_all(mesh);
}

// Saved at one TP size after 3 of 5 epochs, resumed at another: the same run as one process
// straight through (AdamW, whose moments the checkpoint carries; a constant learning rate, so
// the schedule does not depend on the epochs). Five trainer runs, three of them two ranks, with
// checkpoints (each fsynced): about 40 s on a loaded 2-core machine, both directions in one test
// so they share the straight run.
TEST(TpTrainCli, CheckpointsResumeAtAnotherTpSize) {
  const fs::path straight = temp_dir("tp_straight"), a = temp_dir("tp_save2"),
                 b = temp_dir("tp_save1");
  const std::vector<std::string> tp2 = {"--tp", "2", "--nproc_per_node", "2"};
  run_ok(with(tiny_run(straight, 5, true), {"--no_checkpoints"}));
  // TP 2 -> TP 1. The checkpoint holds the gathered model, bit for bit what the run exported.
  run_ok(with(tiny_run(a, 3, true), tp2));
  expect_export_is_checkpoint(a);
  auto r = run_gpulab(with(tiny_run(a, 5, true), {"--resume", "auto"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
  expect_same_losses(straight, a, 5);
  expect_same_weights(straight, a, kAdamTol);
  // TP 1 -> TP 2.
  run_ok(tiny_run(b, 3, true));
  run_ok(with(tiny_run(b, 5, true), {"--resume", "auto", "--tp", "2", "--nproc_per_node", "2"}));
  expect_same_losses(straight, b, 5);
  expect_same_weights(straight, b, kAdamTol);
  testing::remove_all({straight, a, b});
}

// Qwen2 (q/k/v biases) at TP 4 over its 2 kv heads: each kv head (and its bias) kept by two
// ranks, their gradients summed.
TEST(TpTrainCli, Qwen2Tp4EqualsOneProcess) {
  const fs::path one = temp_dir("tp_qwen_one"), tp = temp_dir("tp_qwen_tp4");
  const auto run = [](const fs::path& out) {
    return with(set_flag(tiny_run(out, 3), "--model", "qwen2-tiny"), {"--no_checkpoints"});
  };
  run_ok(run(one));
  run_ok(with(run(tp), {"--tp", "4", "--nproc_per_node", "4"}));
  expect_same_losses(one, tp, 3);
  expect_same_weights(one, tp, kTol);
  fs::remove_all(one);
  fs::remove_all(tp);
}

// --activation_checkpointing recomputes each TP block (and its collectives) in the backward
// pass: the same fp64 sums as storing the activations, so one process without recomputation is
// matched within kTol.
TEST(TpTrainCli, Tp2WithActivationCheckpointingEqualsOneProcess) {
  const fs::path one = temp_dir("tp_ac_one"), tp = temp_dir("tp_ac_tp2");
  run_ok(with(tiny_run(one, 3), {"--no_checkpoints"}));
  auto r = run_gpulab(with(tiny_run(tp, 3), {"--no_checkpoints", "--tp", "2", "--nproc_per_node",
                                             "2", "--activation_checkpointing"}),
                      600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("activation checkpointing on"), std::string::npos) << r.out;
  expect_same_losses(one, tp, 3);
  expect_same_weights(one, tp, kTol);
  fs::remove_all(one);
  fs::remove_all(tp);
}

// --precision bf16 under --tp: it runs, and its validation losses track the fp32 run's within
// bf16's own noise (testing::expect_bf16_tracks_fp32).
TEST(TpTrainCli, Tp2Bf16TracksFp32) {
  const fs::path f32 = temp_dir("tp_bf_fp32"), b16 = temp_dir("tp_bf_one"),
                 tp = temp_dir("tp_bf_tp2");
  const auto run = [](const fs::path& out, const char* precision) {
    return with(set_flag(tiny_run(out, 3), "--precision", precision), {"--no_checkpoints"});
  };
  run_ok(run(f32, "fp32"));
  run_ok(run(b16, "bf16"));
  auto r = run_gpulab(with(run(tp, "bf16"), {"--tp", "2", "--nproc_per_node", "2"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Precision: bf16"), std::string::npos) << r.out;
  testing::expect_bf16_tracks_fp32(f32, b16, tp, 3, "TP 2");
  fs::remove_all(f32);
  fs::remove_all(b16);
  fs::remove_all(tp);
}

// --label_smoothing in the vocabulary-parallel cross-entropy: TP 2 equals one process (torch's
// cross_entropy with label_smoothing) in fp64, within kTol.
TEST(TpTrainCli, Tp2LabelSmoothingEqualsOneProcess) {
  const fs::path one = temp_dir("tp_ls_one"), tp = temp_dir("tp_ls_tp2");
  const auto run = [](const fs::path& out) {
    return with(tiny_run(out, 3), {"--no_checkpoints", "--label_smoothing", "0.1"});
  };
  run_ok(run(one));
  run_ok(with(run(tp), {"--tp", "2", "--nproc_per_node", "2"}));
  expect_same_losses(one, tp, 3);
  expect_same_weights(one, tp, kTol);
  fs::remove_all(one);
  fs::remove_all(tp);
}

// TP 2 x DP 2 with ZeRO-3 over the data-parallel pair (issue 41, item 6) against one process
// that takes both data-parallel ranks' rows in one batch (--batch_size is per rank): the same
// samples, the mean of two equal-sized halves' means is the whole batch's mean. The TP model's
// gradient sums and the clipping norm run on the pieces of the ZeRO gradient shards.
TEST(TpTrainCli, Tp2TimesDp2Zero3EqualsOneProcess) {
  const fs::path one = temp_dir("tp_z3_one"), mesh = temp_dir("tp_z3_mesh");
  run_ok(with(set_flag(tiny_run(one, 5), "--batch_size", "8"), {"--no_checkpoints"}));
  auto r = run_gpulab(with(tiny_run(mesh, 5), {"--no_checkpoints", "--tp", "2", "--nproc_per_node",
                                               "4", "--shard", "full"}),
                      600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Tensor parallel: 2 ranks per model replica (sequence parallel on), data "
                       "parallel 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("shard full"), std::string::npos) << r.out;
  expect_same_losses(one, mesh, 5);
  expect_same_weights(one, mesh, kTol);
  fs::remove_all(one);
  fs::remove_all(mesh);
}

// A ZeRO checkpoint of a mesh: each of the 4 ranks wrote a file, those of the second
// data-parallel replica only their slices of AdamW's moments (no parameter), every rank some of
// them, and together each moment value once (nothing joined on one rank).
void expect_each_rank_wrote_its_slice(const fs::path& run) {
  auto ckpt = find_resumable(run / "checkpoints");
  ASSERT_TRUE(ckpt.has_value());
  const auto index = Json::parse(read_file(ckpt->manifest).value());
  ASSERT_EQ(index["shards"].size(), 4u) << index.dump();
  int64_t params = 0, moments = 0;
  for (size_t r = 0; r < 4; ++r) {
    auto f = read_safetensors(ckpt->manifest.parent_path() / index["shards"][r]["file"]);
    ASSERT_TRUE(f.ok()) << f.error().message;
    int64_t mine_params = 0, mine_moments = 0;
    for (const auto& [key, t] : f->tensors)
      (key.rfind("param/", 0) == 0 ? mine_params : mine_moments) += t.numel();
    EXPECT_EQ(mine_params > 0, r < 2) << "rank " << r;
    EXPECT_GT(mine_moments, 0) << "rank " << r;
    params += mine_params;
    moments += mine_moments;
  }
  EXPECT_EQ(moments, 2 * params);  // exp_avg and exp_avg_sq of every (trained) parameter, once
}

// Checkpoints stay in the ordinary layout under ZeRO: saved at TP 2 x DP 2 with ZeRO-3 after 3
// of 5 epochs (each rank writing its own slice of the moments), resumed at TP 1 (DDP over the
// same two data-parallel ranks, so --batch_size, which a resume must keep, means the same rows),
// at PP 2 x DP 2 with ZeRO-1 (each rank reading its own slice of another layout's slices), and
// the reverse of the first; each equal to one process straight through (AdamW).
TEST(TpTrainCli, Zero3CheckpointsResumeAtTp1AndBack) {
  const fs::path straight = temp_dir("tp_z3_straight"), a = temp_dir("tp_z3_save_mesh"),
                 b = temp_dir("tp_z3_save_dp"), c = temp_dir("tp_z3_to_pp");
  const std::vector<std::string> mesh = {"--tp", "2", "--nproc_per_node", "4", "--shard", "full"};
  const std::vector<std::string> dp2 = {"--nproc_per_node", "2"};
  run_ok(with(set_flag(tiny_run(straight, 5, true), "--batch_size", "8"), {"--no_checkpoints"}));
  run_ok(with(tiny_run(a, 3, true), mesh));
  expect_export_is_checkpoint(a);
  expect_each_rank_wrote_its_slice(a);
  fs::copy(a, c, fs::copy_options::recursive);
  const std::vector<std::string> pp2_zero1 = {"--pp",    "2",         "--nproc_per_node", "4",
                                              "--shard", "optimizer", "--resume",         "auto"};
  EXPECT_NE(run_ok(with(tiny_run(c, 5, true), pp2_zero1)).out.find("Resumed from"),
            std::string::npos);
  expect_same_losses(straight, c, 5, kAdamTol, kFloatUlp);
  expect_same_weights(straight, c, kAdamTol);
  auto r = run_gpulab(with(tiny_run(a, 5, true), with(dp2, {"--resume", "auto"})), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
  expect_same_losses(straight, a, 5);
  expect_same_weights(straight, a, kAdamTol);
  run_ok(with(tiny_run(b, 3, true), dp2));
  run_ok(with(tiny_run(b, 5, true), with(mesh, {"--resume", "auto"})));
  expect_same_losses(straight, b, 5);
  expect_same_weights(straight, b, kAdamTol);
  testing::remove_all({straight, a, b, c});
}

// Refused before any rank starts: exit 2, the message, no run folder.
TEST(TpTrainCli, BadLayoutsAreRefusedBeforeAnyRank) {
  const fs::path dir = temp_dir("tp_bad");
  const fs::path out = dir / "run";
  const auto base = tiny_run(out, 1);
  const auto bad = [&](std::vector<std::string> more, const std::string& says,
                       const std::string& hint) {
    expect_refused(with(base, std::move(more)), out, says, hint);
  };
  // llama-tiny: 8 query and 8 kv heads, FFN 688.
  bad({"--tp", "3", "--nproc_per_node", "3"}, "tensor-parallel size 3 does not fit llama-tiny",
      "use --tp 2");
  bad({"--tp", "2", "--nproc_per_node", "3"}, "does not divide the world size 3", "--tp 1");
  bad({"--tp", "2", "--nproc_per_node", "1", "--nnodes", "2", "--master_addr", "127.0.0.1",
       "--node_rank", "0"},
      "--tp 2 spans nodes: 1 ranks per node on 2 nodes", "--allow_tp_across_nodes");
  expect_refused(with(set_flag(base, "--seq_len", "15"), {"--tp", "2", "--nproc_per_node", "2"}),
                 out, "--seq_len 15 does not split over --tp 2", "--seq_len 16");
  expect_refused(with(set_flag(base, "--precision", "bf16"),
                      {"--tp", "2", "--nproc_per_node", "4", "--shard", "full"}),
                 out, "bf16 parameter copies", "--shard_param_dtype fp32");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
