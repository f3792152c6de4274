// `gpulab train --task grpo --generation_gpus 1` on the CPU: one generation rank and two
// training ranks over Gloo, real processes. After every weight sync the generation rank holds
// the training ranks' weights bit for bit; every step's rollouts were sampled by the policy of
// the step before; the run computes exactly what the colocated two-rank run computes (the
// generation rank draws each training rank's stream); with --overlap_generation each step's
// rollouts are sampled by the policy before the step before, and a stopped run drains the step
// asked for ahead; a killed generation rank stops every rank within the launcher's bound; bad
// layouts are refused before any rank starts.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include "core/files.h"
#include "core/subprocess.h"
#include "launch/ports.h"
#include "train/rl/grpo_test_util.h"
#include "train/trainer_test_util.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;
using namespace grpo_testing;  // NOLINT(google-build-using-namespace): the shared GRPO test pieces

// An adder pre-trained for 60 steps: it puts its mass on digits but is often wrong, so groups
// get different rewards and the policy moves every step (an untrained one scores 0 everywhere:
// no advantage, no update, and equal fingerprints would prove nothing).
const fs::path& partly_trained_adder() {
  static const fs::path dir = adder_folder("grpo_split_adder", 60);
  return dir;
}

// 25 prompts, 5 per training rank a step over 2 training ranks: 2 steps an epoch, `epochs`
// epochs. In fp64 with one thread per rank, so that equal computations give equal bits.
std::vector<std::string> split_args_with_checkpoints(const fs::path& out, int processes,
                                                     int generation_gpus, int epochs = 3) {
  auto a = grpo_args(out, "5e-3", epochs, 5, partly_trained_adder());
  a.insert(a.end(), {"--precision", "fp64", "--threads", "1", "--nproc_per_node",
                     std::to_string(processes)});
  if (generation_gpus > 0)
    a.insert(a.end(), {"--generation_gpus", std::to_string(generation_gpus)});
  return a;
}

std::vector<std::string> split_args(const fs::path& out, int processes, int generation_gpus) {
  auto a = split_args_with_checkpoints(out, processes, generation_gpus);
  a.push_back("--no_checkpoints");
  return a;
}

ProcessResult run_with_hooks(const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{GPULAB_HOOKS_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions ro;
  ro.timeout = std::chrono::seconds(300);
  ro.env_add = env;
  auto r = run_process(argv, ro);
  EXPECT_TRUE(r.ok()) << "cannot start " << GPULAB_HOOKS_BINARY;
  return r ? *r : ProcessResult{};
}

// The split run (1 generation + 2 training processes) against the colocated two-process run of
// the same flags: `steps` optimizer steps, each sampled by the policy of the step before.
// `split_only`: flags of the split run alone; `generator`: the world rank that generates.
void expect_split_equals_colocated(const std::string& name, const std::vector<std::string>& extra,
                                   size_t steps, const std::vector<std::string>& split_only = {},
                                   int generator = 0) {
  const auto dir = testing::temp_dir(name);
  auto split_flags = split_args(dir / "split", 3, 1);
  auto colocated_flags = split_args(dir / "colocated", 2, 0);
  for (size_t f = 0; f + 1 < extra.size(); f += 2) {
    split_flags = with_flag(split_flags, extra[f], extra[f + 1]);
    colocated_flags = with_flag(colocated_flags, extra[f], extra[f + 1]);
  }
  for (size_t f = 0; f + 1 < split_only.size(); f += 2)
    split_flags = with_flag(split_flags, split_only[f], split_only[f + 1]);
  const auto split = run_with_hooks(split_flags, {{"GPULAB_TEST_WEIGHT_HASH", "1"}});
  ASSERT_EQ(split.exit_code, 0) << split.out << split.err;
  const auto colocated = testing::run_gpulab(colocated_flags, 300);
  ASSERT_EQ(colocated.exit_code, 0) << colocated.out << colocated.err;
  EXPECT_NE(split.out.find(fmt::format("Generation rank 0 of 1 (world rank {},", generator)),
            std::string::npos)
      << split.out;
  const auto s = step_records(dir / "split"), c = step_records(dir / "colocated");
  ASSERT_EQ(s.size(), steps) << split.out;
  ASSERT_EQ(c.size(), steps) << colocated.out;
  std::set<std::string> fingerprints;
  for (const auto& [step, rec] : s) {
    SCOPED_TRACE(fmt::format("step {}", step));
    // The rollouts of step k were sampled by the weights of k - 1 optimizer steps (under
    // --grad_accum every micro-batch of step k: the weights change only at the optimizer step).
    EXPECT_EQ(rec.value("policy_step", int64_t{-1}), step - 1);
    // The sync before them: the generation rank's weights are both training ranks', bit for bit.
    const Json& h = rec.at("weight_hashes");
    ASSERT_EQ(h.at("generation").size(), 1u);
    ASSERT_EQ(h.at("training").size(), 2u);
    EXPECT_EQ(h["generation"][0], h["training"][0]);
    EXPECT_EQ(h["training"][0], h["training"][1]);
    fingerprints.insert(h["generation"][0].get<std::string>());
    // Same prompts, same streams, same weights, same kernels: the same numbers, exactly.
    for (const char* key : {"mean_reward", "reward_std", "loss", "kl", "completion_length"})
      EXPECT_EQ(rec.at(key).get<double>(), c.at(step).at(key).get<double>()) << key;
    EXPECT_GT(rec.value("generation_tokens_per_s", 0.0), 0.0);
    EXPECT_GT(rec.value("training_tokens_per_s", 0.0), 0.0);
    const double share = rec.value("generation_share", -1.0);
    EXPECT_GT(share, 0.0);
    EXPECT_LT(share, 1.0);
  }
  // The policy moved every step, so each sync carried new weights.
  EXPECT_EQ(fingerprints.size(), steps);
  EXPECT_EQ(read_file(dir / "split" / "model.safetensors").value_or("a"),
            read_file(dir / "colocated" / "model.safetensors").value_or("b"));
}

TEST(GrpoGenerationRank, SyncsWeightsBitForBitAndEqualsTheColocatedRun) {
  expect_split_equals_colocated("grpo_split", {}, 6);
}

// --generation_gpu_ids 1: the generation rank is world rank 1 (local rank 1, so GPU 1 on a GPU
// host) and world ranks 0 and 2 train, as training ranks 0 and 1: the same run to the bit.
TEST(GrpoGenerationRank, GenerationOnTheGpuItNamesEqualsTheColocatedRun) {
  expect_split_equals_colocated("grpo_split_ids", {}, 6, {"--generation_gpu_ids", "1"}, 1);
}

// --grad_accum 2 with 4 prompts a training rank: 3 micro-batches an epoch (25 prompts, 8 a
// micro-batch), so each epoch has a step of 2 and a step of 1 (the trainer's shorter last
// group): 6 steps, every micro-batch sampled by the policy before its step, one sync a step.
TEST(GrpoGenerationRank, GradAccumSamplesEachMicroBatchWithThePolicyBeforeItsStep) {
  expect_split_equals_colocated("grpo_split_accum", {"--grad_accum", "2", "--batch_size", "4"}, 6);
}

// ZeRO-3 over the training ranks (refused colocated): the whole parameters are gathered for each
// sync, so the generation rank still holds the training ranks' weights bit for bit, and in fp64
// (a sum of two gradients is the same in either order) the run equals the DDP one.
TEST(GrpoGenerationRank, FullyShardedTrainingRanksSyncTheSameWeights) {
  const auto dir = testing::temp_dir("grpo_split_zero3");
  auto args = split_args(dir / "zero3", 3, 1);
  args.insert(args.end(), {"--shard", "full"});
  const auto zero3 = run_with_hooks(args, {{"GPULAB_TEST_WEIGHT_HASH", "1"}});
  ASSERT_EQ(zero3.exit_code, 0) << zero3.out << zero3.err;
  const auto ddp = testing::run_gpulab(split_args(dir / "ddp", 3, 1), 300);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.out << ddp.err;
  const auto z = step_records(dir / "zero3"), d = step_records(dir / "ddp");
  ASSERT_EQ(z.size(), 6u) << zero3.out;
  ASSERT_EQ(d.size(), 6u) << ddp.out;
  for (const auto& [step, rec] : z) {
    SCOPED_TRACE(fmt::format("step {}", step));
    const Json& h = rec.at("weight_hashes");
    EXPECT_EQ(h["generation"][0], h["training"][0]);
    EXPECT_EQ(h["training"][0], h["training"][1]);
    for (const char* key : {"mean_reward", "loss", "completion_length"})
      EXPECT_EQ(rec.at(key).get<double>(), d.at(step).at(key).get<double>()) << key;
  }
}

// The fingerprints a step record holds: the generation rank's weights are both training ranks'.
std::string synced_fingerprint(const Json& rec) {
  const Json& h = rec.at("weight_hashes");
  EXPECT_EQ(h.at("generation").size(), 1u);
  EXPECT_EQ(h.at("training").size(), 2u);
  EXPECT_EQ(h["generation"][0], h["training"][0]);
  EXPECT_EQ(h["training"][0], h["training"][1]);
  return h["generation"][0].get<std::string>();
}

// --overlap_generation: step k+1's rollouts are asked for before step k trains, with the weights
// step k's rollouts were asked with, so the rollouts of step k were sampled by the policy of
// k - 2 optimizer steps (the first two steps both by the initial one). Every sync still leaves
// the generation rank with the training ranks' weights bit for bit; nothing is asked for past
// the run's end (the last step syncs nothing), under --max_steps too. Step 1 samples and trains
// exactly what the colocated run does. The importance weights against the sampling policy (on
// by default when overlapped) are 1 where the sampler was the step's own policy, not elsewhere.
TEST(GrpoGenerationRank, OverlapSamplesEachStepWhileTheStepBeforeTrains) {
  const auto dir = testing::temp_dir("grpo_overlap");
  auto args = split_args(dir / "overlap", 3, 1);
  args.push_back("--overlap_generation");
  const auto r = run_with_hooks(args, {{"GPULAB_TEST_WEIGHT_HASH", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("overlapped: a step's rollouts are sampled while the step before trains"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("% for rollouts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("importance sampling against the sampling policy: sequence_mask to [0, 3]"),
            std::string::npos)
      << r.out;
  // The colocated run with the importance weights the overlapped run takes by default.
  const auto colocated = testing::run_gpulab(
      with_flag(split_args(dir / "colocated", 2, 0), "--importance_sampling", "sequence_mask"),
      300);
  ASSERT_EQ(colocated.exit_code, 0) << colocated.out << colocated.err;
  const auto s = step_records(dir / "overlap"), c = step_records(dir / "colocated");
  ASSERT_EQ(s.size(), 6u) << r.out;
  std::set<std::string> fingerprints;
  for (const auto& [step, rec] : s) {
    SCOPED_TRACE(fmt::format("step {}", step));
    EXPECT_EQ(rec.value("policy_step", int64_t{-1}), std::max<int64_t>(0, step - 2));
    if (step < 6) fingerprints.insert(synced_fingerprint(rec));
    const double wait = rec.value("rollout_wait_share", -1.0);
    EXPECT_GT(wait, 0.0);
    EXPECT_LE(wait, 1.0);
    // The weights π_old / π_sampler: 1 where the sampler was the policy the step starts from
    // (step 1, and every colocated step: the same numbers up to the KV cache's order of fp64
    // additions), not 1 where it was the policy one optimizer step older.
    ASSERT_TRUE(rec.contains("importance_ratio")) << rec.dump();
    const double lag = std::abs(rec.at("importance_ratio").get<double>() - 1.0);
    if (step == 1)
      EXPECT_LT(lag, 1e-9);
    else
      EXPECT_GT(lag, 1e-7);
    EXPECT_LT(std::abs(c.at(step).at("importance_ratio").get<double>() - 1.0), 1e-9);
    std::cout << fmt::format("step {}: importance_ratio overlapped {:.9f}, colocated {:.9f}\n",
                             step, rec.at("importance_ratio").get<double>(),
                             c.at(step).at("importance_ratio").get<double>());
  }
  EXPECT_FALSE(s.at(6).contains("weight_hashes")) << "a sync for a step past the run's end";
  EXPECT_EQ(fingerprints.size(), 5u);  // the policy moved every step: each sync carried new weights
  // Step 1: the same rollouts as the colocated run. The log-probabilities sent with them come from
  // one batch of both training ranks' shares, whose prompts it pads to another length than each
  // rank's own batch does: in fp64 that reorders a few additions (Rollout.Segments...: ~1e-15), so
  // the weights and the loss (about 1e-17 here: a step at the sampling policy) agree to 1e-12.
  for (const char* key : {"mean_reward", "reward_std", "completion_length"})
    EXPECT_EQ(s.at(1).at(key).get<double>(), c.at(1).at(key).get<double>()) << key;
  for (const char* key : {"loss", "importance_ratio"})
    EXPECT_NEAR(s.at(1).at(key).get<double>(), c.at(1).at(key).get<double>(), 1e-12) << key;

  // --max_steps 3 ends inside epoch 2: three steps, the third asks for no fourth. Token-level
  // masking with bounds 1e-6 from 1: the lagged steps' tokens fall outside, step 1's do not.
  auto capped = with_flag(args, "--output_dir", (dir / "capped").string());
  capped = with_flag(capped, "--max_steps", "3");
  capped = with_flag(capped, "--importance_sampling", "token_mask");
  capped = with_flag(capped, "--importance_sampling_min", "0.999999");
  capped = with_flag(capped, "--importance_sampling_max", "1.000001");
  capped.erase(std::find(capped.begin(), capped.end(), "--no_report"));  // its chart, below
  const auto rc = run_with_hooks(capped, {{"GPULAB_TEST_WEIGHT_HASH", "1"}});
  ASSERT_EQ(rc.exit_code, 0) << rc.out << rc.err;
  EXPECT_NE(rc.out.find("% capped)"), std::string::npos) << rc.out;
  EXPECT_NE(read_file(dir / "capped" / "report.html")
                .value_or("")
                .find("Mean importance weight against the sampling policy"),
            std::string::npos);
  const auto m = step_records(dir / "capped");
  ASSERT_EQ(m.size(), 3u) << rc.out;
  EXPECT_TRUE(m.at(2).contains("weight_hashes"));
  EXPECT_FALSE(m.at(3).contains("weight_hashes")) << rc.out;
  EXPECT_EQ(m.at(1).value("importance_capped", -1.0), 0.0);
  for (int64_t step : {2, 3}) EXPECT_GT(m.at(step).value("importance_capped", 0.0), 0.5) << step;
  std::cout << fmt::format("token_mask [0.999999, 1.000001]: capped {} / {} / {}\n",
                           m.at(1).value("importance_capped", -1.0),
                           m.at(2).value("importance_capped", -1.0),
                           m.at(3).value("importance_capped", -1.0));
}

// Ctrl-C while the generation rank samples the step asked for ahead: the training ranks take its
// shares (the generation rank would wait to send them), write the checkpoint and every rank
// leaves, exit 130; --resume auto goes on from that step, whose rollouts the checkpoint's policy
// samples afresh (one policy step newer than the uninterrupted run's), and ends the run.
TEST(GrpoGenerationRank, OverlappedRunStoppedBySigintDrainsAndResumes) {
  const auto dir = testing::temp_dir("grpo_overlap_sigint");
  auto args = split_args_with_checkpoints(dir / "run", 3, 1, 10);
  args.push_back("--overlap_generation");
  const auto stop = interrupt_after_steps(args, dir / "run", dir / "first.log", 3);
  ASSERT_NE(stop.status, -1);
  const std::string& first = stop.log;
  ASSERT_TRUE(WIFEXITED(stop.status)) << first;
  EXPECT_EQ(WEXITSTATUS(stop.status), 130) << first;
  EXPECT_NE(first.find("Stopped by SIGINT"), std::string::npos) << first;
  // Every rank left of itself: none waited past the launcher's grace for a share nobody took.
  EXPECT_EQ(first.find("still running after --stop_grace"), std::string::npos) << first;
  const auto stopped_at = static_cast<int64_t>(step_records(dir / "run").size());
  ASSERT_LT(stopped_at, 20) << first;

  const auto second = testing::run_gpulab(with_flag(args, "--resume", "auto"), 300);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("Resumed from"), std::string::npos) << second.out;
  const auto steps = step_records(dir / "run");
  ASSERT_EQ(steps.size(), 20u) << second.out;
  EXPECT_EQ(steps.at(stopped_at + 1).value("policy_step", int64_t{-1}), stopped_at) << second.out;
  EXPECT_EQ(steps.at(20).value("policy_step", int64_t{-1}), 18) << second.out;
  std::cout << "stopped after step " << stopped_at << ", resumed to step 20\n";
}

// --nnodes 2 on this host (two launchers of 2 processes each, as two machines would run them):
// world rank 0 generates on node 0, ranks 1-3 train across both nodes, and the run equals the
// colocated three-process run bit for bit (25 prompts, 5 a training rank: 1 step an epoch).
TEST(GrpoGenerationRank, TwoNodesEqualTheColocatedRun) {
  const auto dir = testing::temp_dir("grpo_split_nodes");
  const auto port = launch::pick_free_port();
  ASSERT_TRUE(port.ok()) << port.error().message;
  const auto node = [&](int rank, const fs::path& out) {
    auto a = split_args(out, 2, 1);
    a.insert(a.end(), {"--nnodes", "2", "--node_rank", std::to_string(rank), "--master_addr",
                       "127.0.0.1", "--master_port", std::to_string(*port)});
    return a;
  };
  const pid_t node1 = spawn_gpulab(node(1, dir / "node1"), dir / "node1.log");
  ASSERT_GT(node1, 0);
  const auto node0 = testing::run_gpulab(node(0, dir / "split"), 300);
  int status = 0;
  ::waitpid(node1, &status, 0);
  const std::string log1 = read_file(dir / "node1.log").value_or("");
  ASSERT_EQ(node0.exit_code, 0) << node0.out << node0.err << log1;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log1;
  EXPECT_NE(node0.out.find("Generation rank 0 of 1"), std::string::npos) << node0.out;
  EXPECT_NE(node0.out.find("World size: 3"), std::string::npos) << node0.out;
  EXPECT_EQ(log1.find("Generation rank"), std::string::npos) << log1;  // node 1 only trains
  const auto colocated = testing::run_gpulab(split_args(dir / "colocated", 3, 0), 300);
  ASSERT_EQ(colocated.exit_code, 0) << colocated.out << colocated.err;
  const auto s = step_records(dir / "split"), c = step_records(dir / "colocated");
  ASSERT_EQ(s.size(), 3u) << node0.out;
  ASSERT_EQ(c.size(), 3u) << colocated.out;
  for (const auto& [step, rec] : s) {
    SCOPED_TRACE(fmt::format("step {}", step));
    EXPECT_EQ(rec.value("policy_step", int64_t{-1}), step - 1);
    for (const char* key : {"mean_reward", "reward_std", "loss", "completion_length"})
      EXPECT_EQ(rec.at(key).get<double>(), c.at(step).at(key).get<double>()) << key;
  }
  EXPECT_EQ(read_file(dir / "split" / "model.safetensors").value_or("a"),
            read_file(dir / "colocated" / "model.safetensors").value_or("b"));
}

// The generation rank's pid, from its first line.
pid_t generation_pid(const std::string& log) {
  static const std::regex re(R"(Generation rank 0 of 1 \(world rank \d+, pid (\d+)\))");
  std::smatch m;
  return std::regex_search(log, m, re) ? static_cast<pid_t>(std::stol(m[1].str())) : 0;
}

// The launcher stops the other ranks within its bound (docs/ddp.md: SIGTERM, then SIGKILL 3 s
// later); 10 s is the bound the DDP kill case holds it to (tests/integration/ddp/ddp_test.sh).
TEST(GrpoGenerationRank, AKilledGenerationRankStopsEveryRank) {
  const auto dir = testing::temp_dir("grpo_split_kill");
  auto args = with_flag(split_args(dir / "run", 3, 1), "--num_epochs", "400");
  const pid_t launcher = spawn_gpulab(args, dir / "run.log");
  ASSERT_GT(launcher, 0);
  pid_t victim = 0;
  for (int i = 0; i < 1200 && (victim == 0 || step_records(dir / "run").size() < 2); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    victim = generation_pid(read_file(dir / "run.log").value_or(""));
    int status = 0;
    if (::waitpid(launcher, &status, WNOHANG) == launcher)
      FAIL() << "the run ended early: " << read_file(dir / "run.log").value_or("");
  }
  ASSERT_GT(victim, 0) << read_file(dir / "run.log").value_or("");
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = read_file(dir / "run.log").value_or("");
  std::cout << fmt::format("every rank stopped {:.2f} s after the generation rank's SIGKILL\n",
                           seconds);
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_NE(WEXITSTATUS(status), 0) << log;
  EXPECT_LT(seconds, 10.0) << log;
  EXPECT_NE(log.find(fmt::format("rank 0 (pid {}) was killed by signal 9", victim)),
            std::string::npos)
      << log;
}

// Each refused with exit 2 before a rank starts, naming the numbers; no run folder.
TEST(GrpoGenerationRank, BadLayoutsAreRefusedBeforeAnyRankStarts) {
  const auto dir = testing::temp_dir("grpo_split_bad");
  struct Case {
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--nproc_per_node", "1"}, "--generation_gpus 1 with a single process"},
      {{"--generation_gpus", "3"}, "--generation_gpus 3 of 3 processes leaves no training rank"},
      {{"--generation_gpus", "-1"}, "generation_gpus"},
      {{"--task", "auto"}, "--generation_gpus is for --task grpo"},
      {{"--generation_gpu_ids", "3"}, "GPU 3 is not one of the first node's 3 processes' GPUs"},
      {{"--generation_gpu_ids", "1,1"}, "--generation_gpu_ids '1,1' is not a list of GPU indices"},
      {{"--generation_gpu_ids", "0,2"},
       "--generation_gpus 1 with --generation_gpu_ids 0,2 (2 GPUs)"},
      {{"--generation_gpus", "0", "--generation_gpu_ids", "0,1,2"},
       "--generation_gpus 3 of 3 processes leaves no training rank"},
      // Two training ranks (not three processes) take --batch_size prompts each.
      {{"--batch_size", "13"}, "(2 processes x --batch_size 13)"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path out = dir / ("run" + std::to_string(i));
    auto args = split_args(out, 3, 1);
    for (size_t f = 0; f + 1 < cases[i].flags.size(); f += 2)
      args = with_flag(args, cases[i].flags[f], cases[i].flags[f + 1]);
    const auto r = testing::run_gpulab(args, 120);
    EXPECT_EQ(r.exit_code, 2) << cases[i].says << "\n" << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(cases[i].says), std::string::npos) << r.out << r.err;
    EXPECT_FALSE(fs::exists(out)) << cases[i].says;
  }
  // Colocated ranks cannot overlap their own sampling and training.
  auto colocated = split_args(dir / "overlap", 2, 0);
  colocated.push_back("--overlap_generation");
  const auto r = testing::run_gpulab(colocated, 120);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("--overlap_generation needs generation ranks of their own"),
            std::string::npos)
      << r.out << r.err;
  EXPECT_FALSE(fs::exists(dir / "overlap"));
}

}  // namespace
}  // namespace gpulab::train
