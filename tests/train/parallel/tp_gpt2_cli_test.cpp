// `gpulab train --tp` on the GPT-2 family end to end (the built CLI, real ranks over Gloo, fp64):
// TP 2 (gpt2-tiny, tied, sequence parallel) and TP 4 (an untied shape whose vocabulary of 259
// is padded to 260) equal one process over five steps in the validation loss and every weight;
// so do TP 2 without sequence parallelism, with activation checkpointing and label smoothing,
// and TP 2 x DP 2 with ZeRO-3; bf16 tracks fp32 within bf16's noise; a run saved at TP 2 resumes
// at TP 1, its checkpoint and export the ordinary GPT2LMHeadModel layout. Each rank's parameter
// bytes, as printed, are the split layers' 1/TP (the vocabulary padded) plus the replicated
// LayerNorms, position table and row-parallel biases, exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/json.h"
#include "train/models/decoder_config.h"
#include "train/parallel/train_cli_compare.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

using testing::expect_export_is_checkpoint;
using testing::expect_same_weights;
using testing::newest_checkpoint_weights;
using testing::run_gpulab;
using testing::run_ok;
using testing::set_flag;
using testing::temp_dir;
using testing::tiny_run;
using testing::with;
namespace fs = std::filesystem;

// The tolerances and why: train_cli_compare.h.
using testing::kAdamTol;
using testing::kFloatUlp;
using testing::kTol;

using testing::expect_same_losses;

std::vector<std::string> gpt2_run(const fs::path& out, int epochs, bool adamw = false,
                                  const std::string& model = "gpt2-tiny") {
  return tiny_run(out, epochs, adamw, model);
}

// Untied, 4 heads and an FFN of 256 (TP 4 splits both), a vocabulary of 259 (a multiple of
// neither 2 nor 4; the synthetic text's 256 ids fit): written as a GPT-2 config.json in `dir`.
DecoderConfig odd_shape() {
  DecoderConfig c;
  c.family = "gpt2";
  c.name = "gpt2-tp-odd";
  c.vocab_size = 259;
  c.hidden_size = 64;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.max_positions = 64;
  c.norm_eps = 1e-5;
  c.tie_word_embeddings = false;
  return c;
}

std::string write_config(const DecoderConfig& c, const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << c.to_json().dump(2);
  return (dir / "config.json").string();
}

// The elements a rank of TP `tp` holds: each split tensor's 1/tp (the vocabulary rows padded to
// a multiple of tp), each replicated one whole.
int64_t elements_per_rank(const DecoderConfig& c, int64_t tp) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  const int64_t vocab_rows = (c.vocab_size + tp - 1) / tp;
  int64_t n = vocab_rows * h * (c.tie_word_embeddings ? 1 : 2);         // wte (and lm_head)
  n += c.max_positions * h + 2 * h;                                     // wpe, ln_f
  const int64_t split = 3 * h * h + 3 * h + h * h + h * f + f + f * h;  // c_attn, c_proj, c_fc
  n += c.num_layers * (split / tp + 4 * h + 2 * h);  // + ln_1, ln_2, the two c_proj biases
  return n;
}

// The run's printed per-rank and whole-model parameter bytes against the shape's count.
void expect_rank_bytes(const std::string& out, const DecoderConfig& c, int tp) {
  const std::string key = "parameter bytes per rank ";
  const auto at = out.find(key);
  ASSERT_NE(at, std::string::npos) << out;
  long long rank = 0, whole = 0;
  ASSERT_EQ(std::sscanf(out.c_str() + at + key.size(), "%lld of the model's %lld", &rank, &whole),
            2)
      << out.substr(at, 120);
  ASSERT_EQ(whole % c.num_parameters(), 0) << whole;
  const long long element = whole / c.num_parameters();
  EXPECT_EQ(rank, elements_per_rank(c, tp) * element);
  std::printf("TP %d, %s: parameter bytes per rank %lld of %lld (%.1f%%; 1/TP is %.1f%%)\n", tp,
              c.name.c_str(), rank, whole, 100.0 * static_cast<double>(rank) / whole, 100.0 / tp);
}

TEST(TpGpt2TrainCli, Tp2EqualsOneProcess) {
  const fs::path one = temp_dir("tpg_one"), tp = temp_dir("tpg_tp2");
  run_ok(with(gpt2_run(one, 5), {"--no_checkpoints"}));
  auto r =
      run_ok(with(gpt2_run(tp, 5), {"--no_checkpoints", "--tp", "2", "--nproc_per_node", "2"}));
  EXPECT_NE(r.out.find("Tensor parallel: 2 ranks per model replica (sequence parallel on)"),
            std::string::npos)
      << r.out;
  auto c = find_decoder_config("gpt2-tiny").value();
  c.vocab_size = 256;  // the synthetic text's, which gpt2-tiny takes
  expect_rank_bytes(r.out, c, 2);
  expect_same_losses(one, tp, 5);
  expect_same_weights(one, tp, kTol);
  fs::remove_all(one);
  fs::remove_all(tp);
}

TEST(TpGpt2TrainCli, Tp4UntiedPaddedVocabularyEqualsOneProcess) {
  const fs::path dir = temp_dir("tpg_odd"), one = dir / "one", tp = dir / "tp4";
  const auto c = odd_shape();
  const std::string model = write_config(c, dir / "shape");
  run_ok(with(gpt2_run(one, 5, false, model), {"--no_checkpoints"}));
  auto r = run_ok(with(gpt2_run(tp, 5, false, model),
                       {"--no_checkpoints", "--tp", "4", "--nproc_per_node", "4"}));
  expect_rank_bytes(r.out, c, 4);
  expect_same_losses(one, tp, 5);
  expect_same_weights(one, tp, kTol);
  fs::remove_all(dir);
}

// Without sequence parallelism (the replicated gradients whole on every rank), recomputing each
// block in the backward pass, and label smoothing in the vocabulary-parallel loss: one process
// with the same smoothing, within kTol.
TEST(TpGpt2TrainCli, Tp2NoSequenceParallelCheckpointingSmoothingEqualsOneProcess) {
  const fs::path one = temp_dir("tpg_ls_one"), tp = temp_dir("tpg_ls_tp2");
  const auto run = [](const fs::path& out) {
    return with(gpt2_run(out, 3), {"--no_checkpoints", "--label_smoothing", "0.1"});
  };
  run_ok(run(one));
  auto r = run_ok(with(run(tp), {"--tp", "2", "--nproc_per_node", "2", "--sequence_parallel", "off",
                                 "--activation_checkpointing"}));
  EXPECT_NE(r.out.find("(sequence parallel off)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("activation checkpointing on"), std::string::npos) << r.out;
  expect_same_losses(one, tp, 3);
  expect_same_weights(one, tp, kTol);
  fs::remove_all(one);
  fs::remove_all(tp);
}

// TP 2 x DP 2 with ZeRO-3 over the data-parallel pair against one process taking both
// data-parallel ranks' rows in one batch (--batch_size is per rank).
TEST(TpGpt2TrainCli, Tp2TimesDp2Zero3EqualsOneProcess) {
  const fs::path one = temp_dir("tpg_z3_one"), mesh = temp_dir("tpg_z3_mesh");
  run_ok(with(set_flag(gpt2_run(one, 5), "--batch_size", "8"), {"--no_checkpoints"}));
  auto r = run_ok(with(gpt2_run(mesh, 5), {"--no_checkpoints", "--tp", "2", "--nproc_per_node", "4",
                                           "--shard", "full"}));
  EXPECT_NE(r.out.find("data parallel 2"), std::string::npos) << r.out;
  expect_same_losses(one, mesh, 5);
  expect_same_weights(one, mesh, kTol);
  fs::remove_all(one);
  fs::remove_all(mesh);
}

TEST(TpGpt2TrainCli, Tp2Bf16TracksFp32) {
  const fs::path f32 = temp_dir("tpg_bf_fp32"), b16 = temp_dir("tpg_bf_one"),
                 tp = temp_dir("tpg_bf_tp2");
  const auto run = [](const fs::path& out, const char* precision) {
    return with(set_flag(gpt2_run(out, 3), "--precision", precision), {"--no_checkpoints"});
  };
  run_ok(run(f32, "fp32"));
  run_ok(run(b16, "bf16"));
  auto r = run_ok(with(run(tp, "bf16"), {"--tp", "2", "--nproc_per_node", "2"}));
  EXPECT_NE(r.out.find("Precision: bf16"), std::string::npos) << r.out;
  testing::expect_bf16_tracks_fp32(f32, b16, tp, 3, "gpt2 TP 2");
  fs::remove_all(f32);
  fs::remove_all(b16);
  fs::remove_all(tp);
}

// Saved at TP 2 after 3 of 5 epochs (AdamW, whose moments the checkpoint carries), resumed at
// TP 1: the same run as one process straight through. The checkpoint holds the gathered model
// bit for bit what the run exported, and the export is the ordinary GPT2LMHeadModel file (the
// one-process run's names and Conv1D shapes: c_attn hidden x 3 hidden, q, k and v whole).
TEST(TpGpt2TrainCli, CheckpointSavedAtTp2ResumesAtTp1) {
  const fs::path straight = temp_dir("tpg_straight"), a = temp_dir("tpg_save2");
  run_ok(with(gpt2_run(straight, 5, true), {"--no_checkpoints"}));
  run_ok(with(gpt2_run(a, 3, true), {"--tp", "2", "--nproc_per_node", "2"}));
  expect_export_is_checkpoint(a);
  const auto exported = read_safetensors(a / "model.safetensors").value().tensors;
  ASSERT_TRUE(exported.count("transformer.h.0.attn.c_attn.weight"));
  EXPECT_EQ(exported.at("transformer.h.0.attn.c_attn.weight").sizes(),
            (std::vector<int64_t>{256, 768}));
  EXPECT_EQ(exported.at("transformer.wte.weight").sizes(), (std::vector<int64_t>{256, 256}));
  auto r = run_gpulab(with(gpt2_run(a, 5, true), {"--resume", "auto"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
  expect_same_losses(straight, a, 5);
  expect_same_weights(straight, a, kAdamTol);
  fs::remove_all(straight);
  fs::remove_all(a);
}

}  // namespace
}  // namespace gpulab::train
