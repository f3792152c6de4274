// The few-rows product of decode steps (train/ops/small_rows_linear.h): equal to the product in
// float64 within float32's rounding for every row count (1 to 64, every remainder of its 3 x 4
// tiles), odd widths and depths, extra leading dimensions; taken only outside autograd,
// for float32 on the CPU, not under autocast and not with gpulab's CPU kernels off.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "float_rounding.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/small_rows_linear.h"
#include "train/precision.h"

using namespace gpulab::train;

TEST(SmallRowsLinear, EqualsTheProductWithinFloatRoundingForEveryShapeItTakes) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (int64_t rows : {1, 2, 3, 4, 5, 7, 31, 32, 33, 64})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1},
                        {5, 7},
                        {37, 8},
                        {130, 65},
                        {512, 256},
                        {16411, 257}}) {
      const auto x = torch::randn({rows, k}), w = torch::randn({n, k});
      EXPECT_EQ(small_rows_linear_applies(x, w), rows <= kFewRows || w.numel() >= kLargeWeight);
      expect_within_rounding(small_rows_linear(x, w), x, w);
    }
  const auto x3 = torch::randn({2, 3, 40}), w = torch::randn({24, 40});  // 6 rows, batched
  ASSERT_TRUE(small_rows_linear_applies(x3, w));
  EXPECT_EQ(small_rows_linear(x3, w).sizes(), (std::vector<int64_t>{2, 3, 24}));
  expect_within_rounding(small_rows_linear(x3.reshape({6, 40}), w), x3.reshape({6, 40}), w);
}

TEST(SmallRowsLinear, TakesOnlyInferenceProductsOfFewFloatRows) {
  auto w = torch::randn({16, 8}), x = torch::randn({4, 8});
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(small_rows_linear_applies(x, w));
    EXPECT_FALSE(small_rows_linear_applies(torch::randn({kSmallRows + 1, 8}), w));
    EXPECT_FALSE(small_rows_linear_applies(x.to(torch::kDouble), w.to(torch::kDouble)));
    EXPECT_FALSE(small_rows_linear_applies(x, w.t().contiguous().t()));  // w not row-major
    EXPECT_FALSE(small_rows_linear_applies(torch::randn({4, 7}), w));
    set_cpu_kernels(false);
    EXPECT_FALSE(small_rows_linear_applies(x, w));
    set_cpu_kernels(true);
    AutocastGuard bf16(Precision::kBf16, torch::kCPU);  // autocast's product is a bf16 one
    EXPECT_FALSE(small_rows_linear_applies(x, w));
  }
  w.requires_grad_(true);
  EXPECT_FALSE(small_rows_linear_applies(x, w));  // training keeps the BLAS and its gradient
}
