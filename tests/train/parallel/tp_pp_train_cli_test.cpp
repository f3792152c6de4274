// `gpulab train --tp T --pp P` end to end (the built CLI, real ranks over Gloo, fp64): tensor
// parallelism inside pipeline stages. TP 2 x PP 2 on 4 ranks equals one process step for step
// and in its final weights (llama-tiny, 1F1B; qwen2-tiny, whose tied embedding and q/k/v biases
// are split over the TP group on the first and the last stage, interleaved), each rank holding a
// quarter of the parameters (measured); TP 2 x PP 2 x DP 2 on 8 ranks equals DP 2; a checkpoint
// saved at TP 2 x PP 2 is the gathered model in the Hugging Face layout and resumes at one process,
// TP 2 and PP 2 with the same model to the last bit, and checkpoints saved at PP 2 and TP 2 resume
// at TP 2 x PP 2; gpt2-tiny likewise (interleaved, and its checkpoints both ways); ZeRO-1/2/3
// over a TP 2 x PP 2 x DP 2 mesh equals DP 2, and its checkpoints resume without it; --grad_accum
// with --label_smoothing and --init_weights equal one process with the same flags, bf16 tracks
// fp32; bad layouts are refused in the launching process.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <regex>
#include <tuple>

#include "train/checkpoint.h"
#include "train/parallel/train_cli_compare.h"

namespace gpulab::train {
namespace {

using namespace testing;  // NOLINT: the comparison helpers

// Tolerances, as pp_train_cli_test.cpp and tp_train_cli_test.cpp derive them: the same fp64
// operations with a few sums in another order (row-parallel half-sums, the vocabulary-parallel
// loss, per-micro-batch gradients and losses), each a few ulps (2.2e-16 relative), carried
// linearly by SGD over five steps (kTol: a thousand-fold margin; a lost gradient sum moves
// weights by ~1e-3); Adam's first update turns a gradient difference d into lr/eps·d, so runs
// resumed across layouts with AdamW use kAdamTol. Training losses pass a float32 accumulator.
using testing::expect_refused;
using testing::kAdamTol;
using testing::kFloatUlp;
using testing::kTol;

const std::vector<std::string> kTp2Pp2 = {"--tp", "2", "--pp", "2", "--nproc_per_node", "4"};
const std::vector<std::string> kTp2 = {"--tp", "2", "--nproc_per_node", "2"};
const std::vector<std::string> kPp2 = {"--pp", "2", "--nproc_per_node", "2"};

// "...; parameter bytes per rank: largest N, P% of the one-process model's M": (N, M).
std::pair<double, double> rank_bytes(const std::string& out) {
  static const std::regex line(R"(parameter bytes per rank: largest (\d+), [0-9.]+% of the )"
                               R"(one-process model's (\d+))");
  std::smatch m;
  if (!std::regex_search(out, m, line)) return {0, 0};
  return {std::stod(m[1].str()), std::stod(m[2].str())};
}

// TP 2 x PP 2 equal to one process over `epochs` steps; reported once; each rank holds about a
// quarter of the model (`extra`: the share of it that a rank holds whole, beyond a quarter).
void expect_mesh_equals_one_process(const std::string& model, int epochs,
                                    const std::vector<std::string>& more,
                                    const std::string& schedule, double extra = 0) {
  const fs::path one = temp_dir("tppp_one_" + model), mesh = temp_dir("tppp_mesh_" + model);
  run_ok(with(tiny_run(one, epochs, false, model), {"--no_checkpoints"}));
  auto r = run_ok(
      with(with(tiny_run(mesh, epochs, false, model), {"--no_checkpoints"}), with(kTp2Pp2, more)));
  EXPECT_NE(r.out.find("Pipeline parallel: 2 stages, " + schedule), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Tensor parallel: 2 ranks per model replica (sequence parallel on)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Tensor x pipeline parallel: 2 x 2 ranks per model replica"),
            std::string::npos)
      << r.out;
  const auto first = r.out.find("Training took");  // rank 0 alone prints the run's lines
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Training took", first + 1), std::string::npos) << r.out;
  expect_same_losses(one, mesh, static_cast<size_t>(epochs), kTol, kFloatUlp);
  expect_same_weights(one, mesh, kTol);
  // Measured: the bytes of the parameters each rank materialised, the largest of the four. Each
  // holds half of its stage's blocks and vocabulary rows (the stages balanced by FLOPs) and a
  // whole copy of its norms, so a little over a quarter; TP or PP left out would be a half.
  const auto [most, whole] = rank_bytes(r.out);
  ASSERT_GT(whole, 0) << r.out;
  std::printf(
      "%s TP 2 x PP 2: at most %.0f parameter bytes on a rank, %.2f%% of the one-process "
      "model's %.0f (1/4 = 25%%)\n",
      model.c_str(), most, 100 * most / whole, whole);
  EXPECT_GT(most / whole, 0.2 + extra);
  EXPECT_LT(most / whole, 0.3 + extra);
  fs::remove_all(one);
  fs::remove_all(mesh);
}

TEST(TpPpTrainCli, Tp2Pp2EqualsOneProcessLlama) {
  expect_mesh_equals_one_process("llama-tiny", 5, {}, "1F1B");
}

// Tied embeddings (the vocabulary-parallel embedding on the first stage, the same shard as the
// last stage's output layer, their gradients summed between the stages), q/k/v biases, one kv
// head per rank, and the interleaved schedule (4 chunks of one block).
TEST(TpPpTrainCli, Qwen2Tp2Pp2InterleavedEqualsOneProcess) {
  expect_mesh_equals_one_process("qwen2-tiny", 3, {"--pp_schedule", "interleaved"}, "interleaved");
}

// GPT-2 through the same family seam: its fused c_attn split by heads, Conv1D's in x out
// layout, the tied embedding on both end stages, the learned position table (1024 x 256 fp64,
// 7.5 % of the model, held whole by the first stage's ranks: the `extra`), interleaved.
TEST(TpPpTrainCli, Gpt2Tp2Pp2InterleavedEqualsOneProcess) {
  expect_mesh_equals_one_process("gpt2-tiny", 3, {"--pp_schedule", "interleaved"}, "interleaved",
                                 0.075);
}

// A gpt2 checkpoint saved at TP 2 x PP 2 resumes at one process, and one saved at one process
// resumes at TP 2 x PP 2 (AdamW, 2 of 4 epochs), each equal to the run that went straight.
TEST(TpPpTrainCli, Gpt2CheckpointsResumeAcrossLayouts) {
  const fs::path straight = temp_dir("tppp_g_straight"), mesh = temp_dir("tppp_g_mesh"),
                 one = temp_dir("tppp_g_one");
  const auto run = [](const fs::path& out, int epochs) {
    return tiny_run(out, epochs, true, "gpt2-tiny");
  };
  run_ok(with(run(straight, 4), {"--no_checkpoints"}));
  for (const auto& [dir, first, then] : {std::tuple{mesh, kTp2Pp2, std::vector<std::string>{}},
                                         std::tuple{one, std::vector<std::string>{}, kTp2Pp2}}) {
    run_ok(with(run(dir, 2), first));
    auto r = run_ok(with(with(run(dir, 4), {"--resume", "auto"}), then));
    EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
    expect_same_losses(straight, dir, 4, kAdamTol, kFloatUlp);
    expect_same_weights(straight, dir, kAdamTol);
  }
  for (const auto& d : {straight, mesh, one}) fs::remove_all(d);
}

// TP 2 x PP 2 x DP 2 on 8 ranks against DP 2: each data-parallel rank's replica is a 2 x 2 mesh,
// its stages' gradients averaged over the data-parallel pair (about 15 s on 2 cores).
TEST(TpPpTrainCli, Tp2Pp2TimesDp2EqualsDp2) {
  const fs::path dp = temp_dir("tppp_dp2"), mesh = temp_dir("tppp_dp2_mesh");
  run_ok(with(tiny_run(dp, 3), {"--no_checkpoints", "--nproc_per_node", "2"}));
  auto r = run_ok(with(tiny_run(mesh, 3),
                       {"--no_checkpoints", "--tp", "2", "--pp", "2", "--nproc_per_node", "8"}));
  EXPECT_NE(r.out.find("Pipeline parallel: 2 stages, 1F1B schedule, 4 micro-batches of 1 "
                       "sequences, data parallel 2"),
            std::string::npos)
      << r.out;
  expect_same_losses(dp, mesh, 3, kTol, kFloatUlp);
  expect_same_weights(dp, mesh, kTol);
  fs::remove_all(dp);
  fs::remove_all(mesh);
}

// --shard optimizer|gradients|full over the data-parallel pair of a TP 2 x PP 2 mesh (8 ranks)
// against DP 2: each rank's shard of its TP piece of its stage reduce-scattered after the step's
// last flush, the TP sums on the shards' pieces, the norm over every stage's shards (qwen2-tiny's
// tied embedding counted once) with clipping at 0.01, so that it scales every step.
TEST(TpPpTrainCli, Tp2Pp2TimesDp2EveryZeroStageEqualsDp2) {
  const fs::path dp = temp_dir("tppp_zero_dp2");
  const auto run = [](const fs::path& out) {
    return with(set_flag(tiny_run(out, 3, false, "qwen2-tiny"), "--clip_grad", "0.01"),
                {"--no_checkpoints"});
  };
  run_ok(with(run(dp), {"--nproc_per_node", "2"}));
  for (const char* stage : {"optimizer", "gradients", "full"}) {
    const fs::path mesh = temp_dir(std::string("tppp_zero_") + stage);
    auto r = run_ok(
        with(run(mesh), {"--tp", "2", "--pp", "2", "--nproc_per_node", "8", "--shard", stage}));
    EXPECT_NE(r.out.find(std::string("shard ") + stage), std::string::npos) << r.out;
    expect_same_losses(dp, mesh, 3, kTol, kFloatUlp);
    expect_same_weights(dp, mesh, kTol);
    fs::remove_all(mesh);
  }
  fs::remove_all(dp);
}

// ZeRO checkpoints of a TP x PP mesh are ordinary ones (AdamW, 2 of 4 epochs): saved at TP 2 x
// PP 2 x DP 2 with --shard full, resumed at DP 2 without it; saved at DP 2, resumed at TP 2 x PP
// 2 x DP 2 with --shard optimizer; each equal to DP 2 straight.
TEST(TpPpTrainCli, ZeroCheckpointsResumeAcrossLayouts) {
  const fs::path straight = temp_dir("tppp_zc_straight"), mesh = temp_dir("tppp_zc_mesh"),
                 dp = temp_dir("tppp_zc_dp");
  const std::vector<std::string> dp2 = {"--nproc_per_node", "2"};
  const auto zero = [](const char* stage) {
    return std::vector<std::string>{"--tp", "2",       "--pp", "2", "--nproc_per_node",
                                    "8",    "--shard", stage};
  };
  run_ok(with(with(tiny_run(straight, 4, true), {"--no_checkpoints"}), dp2));
  for (const auto& [dir, first, then] :
       {std::tuple{mesh, zero("full"), dp2}, std::tuple{dp, dp2, zero("optimizer")}}) {
    run_ok(with(tiny_run(dir, 2, true), first));
    auto r = run_ok(with(with(tiny_run(dir, 4, true), {"--resume", "auto"}), then));
    EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
    expect_same_losses(straight, dir, 4, kAdamTol, kFloatUlp);
    expect_same_weights(straight, dir, kAdamTol);
  }
  for (const auto& d : {straight, mesh, dp}) fs::remove_all(d);
}

// Saved at TP 2 x PP 2 after 3 of 5 epochs (AdamW, whose moments the checkpoint carries; a
// constant learning rate): the checkpoint is four ranks' pieces (one file each, nothing
// gathered), which joined are the model, bit for bit the export, under the one-process model's
// names and shapes (the Hugging Face layout); read at one process, TP 2
// and PP 2 it is the same model to the last bit (a resume with nothing left to train writes it
// back out); resumed at one process to epoch 5 it is the one-process run. Checkpoints saved at PP
// 2 and at TP 2 resume at TP 2 x PP 2, equal to the one-process run.
TEST(TpPpTrainCli, CheckpointsResumeAcrossLayouts) {
  const fs::path straight = temp_dir("tppp_straight"), mesh = temp_dir("tppp_save_mesh"),
                 from_pp = temp_dir("tppp_save_pp2"), from_tp = temp_dir("tppp_save_tp2");
  run_ok(with(tiny_run(straight, 5, true), {"--no_checkpoints"}));
  run_ok(with(tiny_run(mesh, 3, true), kTp2Pp2));
  const auto newest = find_resumable(mesh / "checkpoints");
  ASSERT_TRUE(newest.has_value());
  for (int r = 0; r < 4; ++r) {
    const std::string stem = newest->manifest.stem().string();
    EXPECT_TRUE(fs::exists(mesh / "checkpoints" /
                           (stem + ".mesh-" + std::to_string(r) + "-of-4.safetensors")))
        << "rank " << r << " wrote no pieces of " << stem;
  }
  expect_export_is_checkpoint(mesh);
  const auto plain = read_safetensors(straight / "model.safetensors").value().tensors;
  const auto saved = newest_checkpoint_weights(mesh);
  ASSERT_EQ(saved.size(), plain.size());
  for (const auto& [name, t] : plain)
    EXPECT_TRUE(saved.count(name) && saved.at(name).sizes() == t.sizes()) << name;
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
      {"one", {}}, {"tp2", kTp2}, {"pp2", kPp2}};
  for (const auto& [name, flags] : layouts) {
    const fs::path copy = temp_dir("tppp_read_" + name);
    fs::copy(mesh, copy, fs::copy_options::recursive);
    fs::remove(copy / "model.safetensors");
    auto r = run_ok(with(with(tiny_run(copy, 3, true), {"--resume", "auto"}), flags));
    EXPECT_NE(r.out.find("Nothing to train"), std::string::npos) << r.out;
    expect_export_is_checkpoint(copy);
    fs::remove_all(copy);
  }
  auto r = run_ok(with(tiny_run(mesh, 5, true), {"--resume", "auto"}));
  EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
  expect_same_losses(straight, mesh, 5, kAdamTol, kFloatUlp);
  expect_same_weights(straight, mesh, kAdamTol);
  for (const auto& [run, flags] : {std::pair{from_pp, kPp2}, std::pair{from_tp, kTp2}}) {
    run_ok(with(tiny_run(run, 3, true), flags));
    auto resumed = run_ok(with(with(tiny_run(run, 5, true), {"--resume", "auto"}), kTp2Pp2));
    EXPECT_NE(resumed.out.find("Resumed from"), std::string::npos) << resumed.out;
    expect_same_losses(straight, run, 5, kAdamTol, kFloatUlp);
    expect_same_weights(straight, run, kAdamTol);
  }
  for (const auto& d : {straight, mesh, from_pp, from_tp}) fs::remove_all(d);
}

// A piece of a TP 2 x PP 2 checkpoint with a changed byte. Named by --resume, the rank that
// reads it stops the resume on every rank before any trains (exit 2, naming the piece), and
// nothing is written. With --resume auto every rank falls back to the checkpoint before it and
// trains on from there as the first run did (epoch 2's losses again, to the last bit).
TEST(TpPpTrainCli, ADamagedPieceStopsANamedResumeAndAutoFallsBack) {
  const fs::path run = temp_dir("tppp_damaged");
  run_ok(with(tiny_run(run, 2, true), kTp2Pp2));
  const auto first = epoch_records(run);
  ASSERT_EQ(first.size(), 2u);
  const auto ckpt = find_resumable(run / "checkpoints");
  ASSERT_TRUE(ckpt.has_value());
  const fs::path piece =
      run / "checkpoints" / (ckpt->manifest.stem().string() + ".mesh-3-of-4.safetensors");
  flip_byte_from_end(piece, 9);
  const auto files_before = std::distance(fs::directory_iterator(run / "checkpoints"), {});
  const auto exported = fs::last_write_time(run / "model.safetensors");
  auto r = run_gpulab(
      with(with(tiny_run(run, 3, true), {"--resume", ckpt->manifest.string()}), kTp2Pp2), 600);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  // The launcher shows the first rank to stop: rank 3 with its own error, or rank 0 with rank
  // 3's words ("rank 3: …; no rank resumed"); either names the piece and what is wrong.
  const std::string damage = "mesh-3-of-4.safetensors does not match its checksum";
  EXPECT_NE(r.err.find(damage), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Resumed from"), std::string::npos) << r.out;
  EXPECT_EQ(std::distance(fs::directory_iterator(run / "checkpoints"), {}), files_before);
  EXPECT_EQ(fs::last_write_time(run / "model.safetensors"), exported);

  auto a = run_gpulab(with(with(tiny_run(run, 3, true), {"--resume", "auto"}), kTp2Pp2), 600);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_NE(a.err.find("warning: skipping damaged checkpoint " + ckpt->manifest.string()),
            std::string::npos)
      << a.err;
  EXPECT_NE(a.err.find(damage), std::string::npos) << a.err;
  EXPECT_NE(a.out.find("Resumed from"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("(epoch 1, step 1"), std::string::npos) << a.out;
  const auto again = epoch_records(run);
  ASSERT_EQ(again.size(), 3u);
  for (const char* key : {"train_loss", "test_loss"})
    EXPECT_EQ(again[1][key].get<double>(), first[1][key].get<double>()) << key;
  fs::remove_all(run);
}

// --grad_accum and --label_smoothing inside TP stages (qwen2-tiny: its tied embedding's gradient
// crosses between the first and last stage once per step, after the accumulation group; 3
// micro-batches an epoch end in a group of one): TP 2 x PP 2 equals one process.
TEST(TpPpTrainCli, GradAccumAndLabelSmoothingEqualOneProcess) {
  const fs::path one = temp_dir("tppp_accum_one"), mesh = temp_dir("tppp_accum_mesh");
  const auto run = [](const fs::path& out) {
    return with(set_flag(tiny_run(out, 3, false, "qwen2-tiny"), "--limit_train_batches", "3"),
                {"--no_checkpoints", "--grad_accum", "2", "--label_smoothing", "0.1"});
  };
  run_ok(run(one));
  auto r = run_ok(with(run(mesh), kTp2Pp2));
  EXPECT_NE(r.out.find("grad_accum 2"), std::string::npos) << r.out;
  const auto recs = epoch_records(mesh);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs.back()["step"].get<int64_t>(), 6);
  expect_same_losses(one, mesh, 3, kTol, kFloatUlp);
  expect_same_weights(one, mesh, kTol);
  for (const auto& d : {one, mesh}) fs::remove_all(d);
}

// --precision bf16 inside TP stages: the validation losses track fp32's within bf16's own noise
// (expect_bf16_tracks_fp32), and the training loss is summed in the stage's dtype as one process
// sums it: a loss taken from the bf16 logits is a bf16 number (it printed 5.625 for 5.6029), which
// three fp32 sums in a row are not but by a chance of about 2^-48.
TEST(TpPpTrainCli, Bf16TracksFp32) {
  const fs::path f32 = temp_dir("tppp_bf_fp32"), b16 = temp_dir("tppp_bf_one"),
                 mesh = temp_dir("tppp_bf_mesh");
  const auto run = [](const fs::path& out, const char* precision) {
    return with(set_flag(tiny_run(out, 3), "--precision", precision), {"--no_checkpoints"});
  };
  run_ok(run(f32, "fp32"));
  run_ok(run(b16, "bf16"));
  auto r = run_ok(with(run(mesh, "bf16"), kTp2Pp2));
  EXPECT_NE(r.out.find("Precision: bf16"), std::string::npos) << r.out;
  expect_bf16_tracks_fp32(f32, b16, mesh, 3, "TP 2 x PP 2");
  int in_bf16 = 0;
  for (const auto& rec : epoch_records(mesh)) {
    const double x = rec["train_loss"];
    in_bf16 += torch::tensor(x, torch::kDouble).to(torch::kBFloat16).item<double>() == x;
  }
  EXPECT_LT(in_bf16, 3) << "every training loss is a bf16 number: the loss was taken in bf16";
  for (const auto& d : {f32, b16, mesh}) fs::remove_all(d);
}

// --init_weights: each TP rank of each stage takes its shard of its stage's tensors from the file
// (fp64, another run's export); TP 2 x PP 2 equals one process started from the same file, and
// both differ from a run from the seed's weights.
TEST(TpPpTrainCli, InitWeightsEqualsOneProcess) {
  const fs::path first = temp_dir("tppp_init_first"), one = temp_dir("tppp_init_one"),
                 mesh = temp_dir("tppp_init_mesh"), seed = temp_dir("tppp_init_seed");
  run_ok(with(tiny_run(first, 2), {"--no_checkpoints"}));
  const auto run = [&](const fs::path& out) {
    return with(tiny_run(out, 3), {"--no_checkpoints", "--init_weights", first.string()});
  };
  run_ok(run(one));
  auto r = run_ok(with(run(mesh), kTp2Pp2));
  EXPECT_NE(r.out.find("Initial weights: "), std::string::npos) << r.out;
  expect_same_losses(one, mesh, 3, kTol, kFloatUlp);
  expect_same_weights(one, mesh, kTol);
  run_ok(with(with(tiny_run(seed, 3), {"--no_checkpoints"}), kTp2Pp2));
  const double from_file = epoch_records(mesh)[0]["test_loss"],
               from_seed = epoch_records(seed)[0]["test_loss"];
  EXPECT_GT(rel(from_file, from_seed), 1e-6) << "--init_weights changed nothing";
  for (const auto& d : {first, one, mesh, seed}) fs::remove_all(d);
}

// Refused before any rank starts: exit 2, the message and its hint, no run folder.
TEST(TpPpTrainCli, BadLayoutsAreRefusedBeforeAnyRank) {
  const fs::path dir = temp_dir("tppp_bad");
  const fs::path out = dir / "run";
  const auto base = tiny_run(out, 1);
  const auto bad = [&](const std::vector<std::string>& more, const std::string& says,
                       const std::string& hint) {
    expect_refused(with(base, more), out, says, hint);
  };
  // llama-tiny: 4 blocks, 8 query and 8 kv heads, FFN 688.
  bad({"--tp", "2", "--pp", "2", "--nproc_per_node", "6"},
      "tp x pp = 4 does not divide the world size 6", "--tp 2 --pp 1");
  bad({"--tp", "3", "--pp", "2", "--nproc_per_node", "6"},
      "tensor-parallel size 3 does not fit llama-tiny", "use --tp 2");
  bad({"--tp", "2", "--pp", "8", "--nproc_per_node", "16"}, "--pp 8 needs 8 blocks", "--pp 4");
  bad({"--tp", "2", "--pp", "2", "--nproc_per_node", "1", "--nnodes", "4", "--master_addr",
       "127.0.0.1", "--node_rank", "0"},
      "--tp 2 spans nodes", "--allow_tp_across_nodes");
  expect_refused(with(set_flag(base, "--seq_len", "15"), kTp2Pp2), out,
                 "--seq_len 15 does not split over --tp 2", "--seq_len 16");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
