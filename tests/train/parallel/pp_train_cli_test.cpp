// `gpulab train --pp` end to end (the built CLI, real ranks over Gloo, fp64): PP 2 equals one
// process step for step and in its final weights for llama (untied) and gpt2 (tied embeddings,
// the tied weight on the first and the last stage); the interleaved schedule too; PP 2 x DP 2
// on 4 ranks equals DP 2; a run saved at PP 2 resumes at PP 2 bit for bit and at PP 1 (and the
// reverse) equal to the uninterrupted run, its checkpoint the gathered model bit for bit; each
// stage holds its share of the parameters (measured) and the run reports its idle fraction;
// bad layouts are refused in the launching process; a rank killed mid-pipeline ends the job.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <regex>
#include <thread>

#include "core/files.h"
#include "core/subprocess.h"
#include "train/checkpoint.h"
#include "train/parallel/train_cli_compare.h"

namespace gpulab::train {
namespace {

using namespace testing;  // NOLINT: the comparison helpers

// Tolerances. PP runs the one-process model's operations in the same order on each micro-batch;
// what differs is the order of a few sums: the batch's loss is the sum of per-micro-batch sums
// over the token count (one process: one mean), a block's weight gradient is accumulated over
// micro-batches (one process: one product over the whole batch), DP 2 sums two ranks' means. Each
// is off by a few fp64 ulps (2.2e-16 relative); SGD with momentum carries such differences
// through five steps about linearly, so kTol = 1e-12 leaves a thousand-fold margin, while a lost
// gradient (a tied embedding's half, a missing DP mean) moves weights by ~1e-3. Adam turns an
// absolute gradient difference d into lr / eps d where |g| is near eps (train_cli_compare.h
// derives ~1e-10 after five steps), so runs resumed across layouts with AdamW use kAdamTol =
// 1e-8, far below what a lost moment does (~lr = 3e-3). A resume at the same layout is bit for
// bit (tolerance 0): the same operations in the same order.
using testing::expect_refused;
using testing::kAdamTol;
using testing::kFloatUlp;
using testing::kTol;

using testing::kPp2;

// "Pipeline parallel: ..., parameter bytes per stage: A (a%), B (b%)": every stage's bytes.
std::vector<double> stage_bytes(const std::string& out) {
  std::vector<double> bytes;
  const auto at = out.find("parameter bytes per stage: ");
  if (at == std::string::npos) return bytes;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  static const std::regex one(R"((\d+) \()");
  for (std::sregex_iterator it(line.begin(), line.end(), one), end; it != end; ++it)
    bytes.push_back(std::stod((*it)[1].str()));
  return bytes;
}

// Equal to one process over 5 steps; reported once; each stage holds part of the model.
void expect_pp2_equals_one_process(const std::string& model, std::vector<std::string> more,
                                   const std::string& schedule) {
  const fs::path one = temp_dir("pp_one_" + model), pp = temp_dir("pp_pp2_" + model);
  run_ok(with(tiny_run(one, 5, false, model), {"--no_checkpoints"}));
  auto r =
      run_ok(with(with(tiny_run(pp, 5, false, model), {"--no_checkpoints"}), with(kPp2, more)));
  EXPECT_NE(r.out.find("Pipeline parallel: 2 stages, " + schedule), std::string::npos) << r.out;
  const auto first = r.out.find("Training took");  // rank 0 alone prints the run's lines
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Training took", first + 1), std::string::npos) << r.out;
  expect_same_losses(one, pp, 5, kTol, kFloatUlp);
  expect_same_weights(one, pp, kTol);
  // Measured: the bytes of the parameters each stage materialised. Stages are balanced by FLOPs,
  // not bytes (an embedding row costs a lookup, a block a matrix product per weight), so a stage
  // holds between a quarter and three quarters of these tiny models, never all of it.
  const auto bytes = stage_bytes(r.out);
  ASSERT_EQ(bytes.size(), 2u) << r.out;
  double total = 0;
  for (double b : bytes) total += b;
  for (size_t s = 0; s < bytes.size(); ++s) {
    std::printf("stage %zu: %.0f parameter bytes, %.1f%% of the stages' total (1/P = 50%%)\n", s,
                bytes[s], 100 * bytes[s] / total);
    EXPECT_GT(bytes[s] / total, 0.25);
    EXPECT_LT(bytes[s] / total, 0.75);
  }
  const auto recs = epoch_records(pp);
  ASSERT_TRUE(recs.back().contains("pipeline_idle_fraction"));
  std::printf(
      "measured idle fraction of stage 0: %.3f (the schedule's bubble on equal stages: %s)\n",
      recs.back()["pipeline_idle_fraction"].get<double>(),
      schedule == "1F1B" ? "(P-1)/(M+P-1) = 1/5 = 0.200" : "(P-1)/(V·M+P-1) = 1/9 = 0.111");
  fs::remove_all(one);
  fs::remove_all(pp);
}

TEST(PpTrainCli, Pp2EqualsOneProcessLlama) {
  expect_pp2_equals_one_process("llama-tiny", {}, "1F1B");
}

TEST(PpTrainCli, Pp2EqualsOneProcessGpt2TiedEmbeddings) {
  expect_pp2_equals_one_process("gpt2-tiny", {}, "1F1B");
}

TEST(PpTrainCli, Pp2InterleavedEqualsOneProcess) {
  expect_pp2_equals_one_process("llama-tiny", {"--pp_schedule", "interleaved"}, "interleaved");
}

TEST(PpTrainCli, Pp2TimesDp2EqualsDp2) {
  const fs::path dp = temp_dir("pp_dp2"), mesh = temp_dir("pp_mesh");
  run_ok(with(tiny_run(dp, 5), {"--no_checkpoints", "--nproc_per_node", "2"}));
  auto r =
      run_ok(with(tiny_run(mesh, 5), {"--no_checkpoints", "--pp", "2", "--nproc_per_node", "4"}));
  EXPECT_NE(r.out.find("data parallel 2"), std::string::npos) << r.out;
  expect_same_losses(dp, mesh, 5, kTol, kFloatUlp);
  expect_same_weights(dp, mesh, kTol);
  fs::remove_all(dp);
  fs::remove_all(mesh);
}

// Saved at PP 2 after 3 of 5 epochs (AdamW, whose moments the checkpoint carries; a constant
// learning rate): resumed at PP 2 it is the uninterrupted PP 2 run bit for bit; resumed at PP 1
// it is the one-process run; and a one-process checkpoint resumes at PP 2. Eight trainer runs,
// five of them two ranks, with checkpoints (each fsynced): about 95 s on the loaded 2-core
// machine (53-97 s measured), every direction in one test so that they share the two straight runs.
TEST(PpTrainCli, CheckpointsResumeAtAnotherPipelineSize) {
  const fs::path one = temp_dir("pp_straight1"), two = temp_dir("pp_straight2"),
                 a = temp_dir("pp_save2"), b = temp_dir("pp_save2b"), c = temp_dir("pp_save1");
  run_ok(with(tiny_run(one, 5, true), {"--no_checkpoints"}));
  run_ok(with(with(tiny_run(two, 5, true), {"--no_checkpoints"}), kPp2));
  // PP 2 -> PP 2, and the checkpoint holds the gathered model, bit for bit the export.
  run_ok(with(tiny_run(a, 3, true), kPp2));
  expect_export_is_checkpoint(a);
  fs::copy(a, b, fs::copy_options::recursive);
  auto r = run_ok(with(with(tiny_run(a, 5, true), {"--resume", "auto"}), kPp2));
  EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
  expect_same_losses(two, a, 5, 0, 0);
  expect_same_weights(two, a, 0);
  // PP 2 -> PP 1.
  run_ok(with(tiny_run(b, 5, true), {"--resume", "auto"}));
  expect_same_losses(one, b, 5, kAdamTol, kFloatUlp);
  expect_same_weights(one, b, kAdamTol);
  // PP 1 -> PP 2.
  run_ok(tiny_run(c, 3, true));
  run_ok(with(with(tiny_run(c, 5, true), {"--resume", "auto"}), kPp2));
  expect_same_losses(one, c, 5, kAdamTol, kFloatUlp);
  expect_same_weights(one, c, kAdamTol);
  // A checkpoint of another model shape is refused, and nothing is overwritten.
  auto bad = run_gpulab(with(set_flag(tiny_run(c, 6, true), "--model", "qwen2-tiny"),
                             {"--resume", "auto", "--pp", "2", "--nproc_per_node", "2"}),
                        600);
  EXPECT_NE(bad.exit_code, 0) << bad.out << bad.err;
  const auto said = bad.err.find("error:");
  EXPECT_NE(said, std::string::npos) << bad.err;
  if (said != std::string::npos)
    std::printf("another shape's resume: exit %d: %s\n", bad.exit_code,
                bad.err.substr(said, bad.err.find('\n', said) - said).c_str());
  EXPECT_EQ(find_resumable(c / "checkpoints")->epoch, 5);
  expect_same_weights(one, c, kAdamTol);
  for (const auto& d : {one, two, a, b, c}) fs::remove_all(d);
}

// Refused before any rank starts: exit 2, the message, no run folder.
TEST(PpTrainCli, BadLayoutsAreRefusedBeforeAnyRank) {
  const fs::path dir = temp_dir("pp_bad");
  const fs::path out = dir / "run";
  const auto base = tiny_run(out, 1);
  const auto bad = [&](const std::vector<std::string>& more, const std::string& says,
                       const std::string& hint) {
    expect_refused(with(base, more), out, says, hint);
  };
  // llama-tiny has 4 blocks.
  bad({"--pp", "8", "--nproc_per_node", "8"}, "8", "--pp 4");
  bad({"--pp", "2", "--pp_schedule", "interleaved", "--pp_virtual_stages", "4", "--nproc_per_node",
       "2"},
      "4", "--pp 1");
  bad({"--pp", "2", "--nproc_per_node", "3"}, "does not divide the world size 3", "--pp 1");
  bad({"--pp", "2", "--nproc_per_node", "2", "--pp_micro_batches", "3"},
      "a batch of 4 sequences per process does not split into 3 micro-batches",
      "--pp_micro_batches that divides 4");
  fs::remove_all(dir);
}

// World rank 1's process of the job writing into `run` (its environment names RANK=1), or 0.
pid_t rank1_of(const fs::path& run) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    auto cmd = read_file(e.path() / "cmdline");
    auto env = read_file(e.path() / "environ");
    if (!cmd || !env || cmd->find(run.string()) == std::string::npos) continue;
    if (env->find(std::string("\0RANK=1\0", 8)) != std::string::npos ||
        env->rfind("RANK=1", 0) == 0)
      return static_cast<pid_t>(std::stol(pid));
  }
  return 0;
}

// Rank 1 (the last stage) stalls before its third micro-step (a test hook), once epoch 2's
// checkpoint is complete, while rank 0 runs step 3's forwards and waits in the pipeline's
// receive for a gradient that never comes; the test then kills rank 1 (SIGKILL). The launcher
// must end the job with rank 0 stopped too, well within its bound; the newest complete
// checkpoint stays epoch 2's.
TEST(PpTrainCli, RankKilledMidPipelineStopsEveryRank) {
  const fs::path dir = temp_dir("pp_kill");
  const fs::path run = dir / "run";
  std::vector<std::string> argv = {GPULAB_HOOKS_BINARY};
  for (const auto& a : with(tiny_run(run, 50), kPp2)) argv.push_back(a);
  RunOptions ro;
  ro.timeout = std::chrono::seconds(300);
  ro.env_add = {{"GPULAB_TEST_STALL", "1:3"}};
  ProcessResult result;
  std::thread job([&] { result = run_process(argv, ro).value_or(ProcessResult{}); });
  pid_t victim = 0;
  for (int i = 0; i < 1200 && victim == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const auto ckpt = fs::exists(run / "checkpoints") ? find_resumable(run / "checkpoints")
                                                      : std::optional<CheckpointInfo>();
    if (ckpt && ckpt->epoch == 2) victim = rank1_of(run);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // rank 0 is blocked in step 3
  const auto killed = std::chrono::steady_clock::now();
  if (victim != 0) ::kill(victim, SIGKILL);
  job.join();
  ASSERT_NE(victim, 0) << "rank 1 never reached its stall: " << result.out << result.err;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("the job ended %.1f s after rank 1 was killed (exit %d)\n", secs, result.exit_code);
  EXPECT_NE(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.err.find("stalls before micro-step 3"), std::string::npos) << result.err;
  // Rank 0 was waiting in the pipeline, and its receive failed as rank 1's sockets closed.
  EXPECT_NE(result.err.find("activation gradient from pipeline stage 1 failed on rank 0"),
            std::string::npos)
      << result.err;
  // The launcher ends the job once a rank dies (it does not wait for the collective timeout).
  EXPECT_LT(secs, 30.0) << result.out << result.err;
  EXPECT_EQ(rank1_of(run), 0);
  EXPECT_EQ(find_resumable(run / "checkpoints")->epoch, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
