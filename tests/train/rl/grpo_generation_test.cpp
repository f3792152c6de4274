// `gpulab train --task grpo --generation_gpus 1` on the CPU: one generation rank and two
// training ranks over Gloo, real processes. After every weight sync the generation rank holds
// the training ranks' weights bit for bit; every step's rollouts were sampled by the policy of
// the step before; the run computes exactly what the colocated two-rank run computes (the
// generation rank draws each training rank's stream); a killed generation rank stops every rank
// within the launcher's bound; bad layouts are refused before any rank starts.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <set>
#include <thread>

#include "core/files.h"
#include "core/subprocess.h"
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

// 25 prompts, 5 per training rank a step over 2 training ranks: 2 steps an epoch, 3 epochs. In
// fp64 with one thread per rank, so that equal computations give equal bits.
std::vector<std::string> split_args(const fs::path& out, int processes, int generation_gpus) {
  auto a = grpo_args(out, "5e-3", 3, 5, partly_trained_adder());
  a.insert(a.end(), {"--precision", "fp64", "--threads", "1", "--no_checkpoints",
                     "--nproc_per_node", std::to_string(processes)});
  if (generation_gpus > 0)
    a.insert(a.end(), {"--generation_gpus", std::to_string(generation_gpus)});
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
void expect_split_equals_colocated(const std::string& name, const std::vector<std::string>& extra,
                                   size_t steps) {
  const auto dir = testing::temp_dir(name);
  auto split_flags = split_args(dir / "split", 3, 1);
  auto colocated_flags = split_args(dir / "colocated", 2, 0);
  for (size_t f = 0; f + 1 < extra.size(); f += 2) {
    split_flags = with_flag(split_flags, extra[f], extra[f + 1]);
    colocated_flags = with_flag(colocated_flags, extra[f], extra[f + 1]);
  }
  const auto split = run_with_hooks(split_flags, {{"GPULAB_TEST_WEIGHT_HASH", "1"}});
  ASSERT_EQ(split.exit_code, 0) << split.out << split.err;
  const auto colocated = testing::run_gpulab(colocated_flags, 300);
  ASSERT_EQ(colocated.exit_code, 0) << colocated.out << colocated.err;
  EXPECT_NE(split.out.find("Generation rank 0 of 1"), std::string::npos) << split.out;
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

// The generation rank's pid, from its first line.
pid_t generation_pid(const std::string& log) {
  static const std::regex re(R"(Generation rank 0 of 1 \(pid (\d+)\))");
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
}

}  // namespace
}  // namespace gpulab::train
