// Training through the CLI over every language-model family (lm_family_rows.h: each family's
// "-tiny" shape): a resumed run continues bit for bit (AdamW's moments, the data position and
// the step count restored), and ZeRO-3 over two Gloo ranks equals one process in fp64. A family
// added to the shape table with a tiny shape gets both with nothing added here; parity with
// transformers (greedy generation included) is the same rows' FamilyParity.
#include <gtest/gtest.h>

#include "train/lm_family_rows.h"
#include "train/parallel/train_cli_compare.h"

namespace gpulab::train {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the compare helpers
using Row = std::pair<std::string, std::string>;  // family, its tiny shape

class FamilyTrain : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(GetParam().second.empty())
        << GetParam().first << " has no -tiny shape in decoder_shapes()";
  }
  const std::string& tiny() const { return GetParam().second; }
};

// 2 epochs of one AdamW step each straight, against 1 epoch then --resume auto to 2: the same
// weights to the bit (a lost moment, step count or data position changes them at ~lr).
TEST_P(FamilyTrain, ResumeIsBitwise) {
  const fs::path straight = temp_dir("family_straight"), resumed = temp_dir("family_resumed");
  run_ok(tiny_run(straight, 2, true, tiny()));
  run_ok(tiny_run(resumed, 1, true, tiny()));
  auto r = run_ok(with(tiny_run(resumed, 2, true, tiny()), {"--resume", "auto"}));
  EXPECT_NE(r.out.find("Resumed from"), std::string::npos) << r.out;
  expect_same_losses(straight, resumed, 2, 0, 0);
  expect_same_weights(straight, resumed, 0);
  remove_all({straight, resumed});
}

// ZeRO-3 (parameters, gradients and SGD momentum sharded) over two ranks of 4 rows each against
// one process taking both ranks' 8 rows: the same fp64 sums in another order (kTol). Gradient
// shards summed instead of averaged move the weights by 1e-8 to 1.3e-7 (clipping to norm 1
// absorbs most of the factor 2), far above kTol.
TEST_P(FamilyTrain, Zero3OverTwoRanksEqualsOneProcess) {
  const fs::path one = temp_dir("family_one"), zero3 = temp_dir("family_zero3");
  run_ok(
      with(set_flag(tiny_run(one, 3, false, tiny()), "--batch_size", "8"), {"--no_checkpoints"}));
  auto r = run_ok(with(tiny_run(zero3, 3, false, tiny()),
                       {"--no_checkpoints", "--nproc_per_node", "2", "--shard", "full"}));
  EXPECT_NE(r.out.find("shard full"), std::string::npos) << r.out;
  expect_same_losses(one, zero3, 3, kTol, kFloatUlp);
  expect_same_weights(one, zero3, kTol);
  remove_all({one, zero3});
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, FamilyTrain, ::testing::ValuesIn(family_rows()),
                         family_row_name);

}  // namespace
}  // namespace gpulab::train
