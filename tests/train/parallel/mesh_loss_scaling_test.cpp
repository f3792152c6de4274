// fp16's loss scaling under --tp and --pp (the built CLI, real ranks over Gloo, fp64): with the
// scaler on (a test hook: the CPU runs no fp16) and one rank's gradients made inf before step 2,
// every rank of the mesh skips that step and halves its scale, as one process does with the same
// overflow: the same losses and final weights. A rank that skipped alone (each rank's own
// overflow check) would part from the others; a pipeline whose last stage ran its backward
// without the scale would have every stage's gradients unscaled to 1/65536 of their size.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "train/parallel/train_cli_compare.h"
#include "train/trainer_test_util.h"

namespace gpulab::train {
namespace {

// Qualified (testing::) throughout: this file shares its unity unit with others that define
// helpers of the same names.
namespace fs = std::filesystem;

constexpr size_t kScalingEpochs = 4;  // one step each

// `gpulab-hooks train ...` with the loss scaler on and rank `inf_rank`'s gradients made inf
// before optimizer step 2.
void run_overflowing(const fs::path& out, const std::vector<std::string>& layout, int inf_rank) {
  std::vector<std::string> argv = {GPULAB_HOOKS_BINARY};
  for (const auto& a :
       testing::with(testing::tiny_run(out, kScalingEpochs),
                     testing::with({"--no_checkpoints", "--dist_timeout", "60"}, layout)))
    argv.push_back(a);
  RunOptions ro;
  ro.timeout = std::chrono::seconds(600);
  ro.env_add = {{"GPULAB_TEST_LOSS_SCALING", "1"},
                {"GPULAB_TEST_NUDGE_GRAD", std::to_string(inf_rank) + ":2:inf"}};
  auto r = run_process(argv, ro);
  ASSERT_TRUE(r.ok()) << "cannot start " << GPULAB_HOOKS_BINARY;
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_NE(r->err.find("rank " + std::to_string(inf_rank) + " step 2 gradient nudged by inf"),
            std::string::npos)
      << r->err;
}

// The one-process run skipped step 2 (its record says so), and `mesh` did the same.
void expect_skipped_together(const fs::path& one, const fs::path& mesh) {
  const auto ea = testing::epoch_records(one), eb = testing::epoch_records(mesh);
  ASSERT_EQ(ea.size(), kScalingEpochs);
  ASSERT_EQ(eb.size(), kScalingEpochs);
  EXPECT_EQ(ea[0]["skipped_steps"], 0);
  EXPECT_EQ(ea.back()["skipped_steps"], 1);
  EXPECT_EQ(eb.back()["skipped_steps"], 1);
  testing::expect_same_losses(one, mesh, kScalingEpochs, testing::kTol, testing::kFloatUlp);
  testing::expect_same_weights(one, mesh, testing::kTol);
}

TEST(MeshLossScaling, Tp2AndPp2SkipAnOverflowingStepOnEveryRank) {
  const fs::path one = testing::temp_dir("mls_one"), tp = testing::temp_dir("mls_tp2"),
                 pp = testing::temp_dir("mls_pp2");
  run_overflowing(one, {}, 0);
  // TP: rank 1's slices overflow, rank 0's do not.
  run_overflowing(tp, {"--tp", "2", "--nproc_per_node", "2"}, 1);
  expect_skipped_together(one, tp);
  // PP: the first stage's gradients overflow; the last stage holds the loss and its scale.
  run_overflowing(pp, {"--pp", "2", "--nproc_per_node", "2"}, 0);
  expect_skipped_together(one, pp);
  for (const auto& d : {one, tp, pp}) fs::remove_all(d);
}

// TP 2 x PP 2 with ZeRO-3 on 4 ranks (a data-parallel group of one): ZeRO's own check spans its
// data-parallel group alone, so only the mesh's, over the world, makes the four ranks agree.
TEST(MeshLossScaling, Tp2TimesPp2WithZeroSkipsTogether) {
  const fs::path one = testing::temp_dir("mls_z_one"), mesh = testing::temp_dir("mls_z_mesh");
  run_overflowing(one, {}, 0);
  run_overflowing(mesh, {"--tp", "2", "--pp", "2", "--nproc_per_node", "4", "--shard", "full"}, 3);
  expect_skipped_together(one, mesh);
  for (const auto& d : {one, mesh}) fs::remove_all(d);
}

}  // namespace
}  // namespace gpulab::train
