// Decode products against packed weights (train/ops/packed_linear.h): equal to the product in
// float64 within float32's rounding for both weight layouts, every row count the tiles split
// (1 to 70) and widths that leave a panel part empty; taken only inside a PackedWeights set,
// outside autograd, for float32 within its row range; a weight changed in place is packed again.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "avx2_kernels.h"
#include "float_rounding.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/packed_linear.h"
#include "train/precision.h"

using namespace gpulab::train;

namespace {}  // namespace

TEST(PackedLinear, EqualsTheProductWithinFloatRoundingInBothLayouts) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 32, 70})
    for (auto [n, k] :
         {std::pair<int64_t, int64_t>{1, 1}, {16, 9}, {17, 33}, {130, 65}, {512, 256}}) {
      const auto x = torch::randn({rows, k}), w = torch::randn({n, k});
      expect_within_rounding(packed_linear(x, pack_weight(w, false), n), x, w);
      // GPT-2's Conv1D keeps [in, out]: packed from it, the same product.
      const auto conv1d = w.t().contiguous();
      expect_within_rounding(packed_linear(x, pack_weight(conv1d, true), n), x, w);
    }
}

TEST(PackedLinear, TakesOnlyAGenerationsFloatProductsInItsRowRange) {
  if (!avx2_kernels_here()) GTEST_SKIP() << "no AVX2 + FMA: the products keep the BLAS";
  auto w = torch::randn({40, 24}), x = torch::randn({8, 24});
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(packed_decode_product(x, w, false).defined()) << "no PackedWeights set current";
  {
    PackedWeights set;
    const auto y = packed_decode_product(x, w, false);
    ASSERT_TRUE(y.defined());
    expect_within_rounding(y, x, w);
    EXPECT_EQ(set.bytes(), 48 * 24 * 4) << "three panels of 16 columns";
    EXPECT_TRUE(packed_decode_product(x.view({2, 4, 24}), w, false).defined());  // 8 rows, batched
    EXPECT_FALSE(packed_decode_product(torch::randn({kPackedMinRows - 1, 24}), w, false).defined());
    EXPECT_FALSE(packed_decode_product(torch::randn({kPackedMaxRows + 1, 24}), w, false).defined());
    EXPECT_FALSE(
        packed_decode_product(x.to(torch::kDouble), w.to(torch::kDouble), false).defined());
    EXPECT_FALSE(packed_decode_product(torch::randn({8, 23}), w, false).defined());
    set_cpu_kernels(false);
    EXPECT_FALSE(packed_decode_product(x, w, false).defined());
    set_cpu_kernels(true);
    {
      AutocastGuard bf16(Precision::kBf16, torch::kCPU);  // autocast's product is a bf16 one
      EXPECT_FALSE(packed_decode_product(x, w, false).defined());
    }
    {
      torch::AutoGradMode grad(true);
      auto trained = w.clone().requires_grad_(true);
      EXPECT_FALSE(packed_decode_product(x, trained, false).defined());
    }
  }
  EXPECT_FALSE(packed_decode_product(x, w, false).defined()) << "the set ended with its scope";
}

TEST(PackedLinear, AWeightChangedInPlaceIsPackedAgain) {
  if (!avx2_kernels_here()) GTEST_SKIP() << "no AVX2 + FMA: the products keep the BLAS";
  torch::NoGradGuard no_grad;
  auto w = torch::randn({20, 16});
  const auto x = torch::randn({6, 16});
  PackedWeights set;
  const auto before = packed_decode_product(x, w, false);
  w.mul_(2);  // an optimizer step between two generations of one set
  const auto after = packed_decode_product(x, w, false);
  expect_within_rounding(after, x, w);
  EXPECT_FALSE(torch::allclose(before, after));
  EXPECT_EQ(set.bytes(), 32 * 16 * 4) << "the old copy replaced, not kept beside it";
}

TEST(PackedLinear, ASetPastItsByteBoundLeavesTheRestToTheBlas) {
  if (!avx2_kernels_here()) GTEST_SKIP() << "no AVX2 + FMA: the products keep the BLAS";
  torch::NoGradGuard no_grad;
  // Weights of 48 MiB each are packed until the next would take the set past kPackedBytesMax.
  const int64_t n = 16 * 1024, k = 768;
  const int64_t fits = kPackedBytesMax / (n * k * 4);
  std::vector<torch::Tensor> weights;
  for (int64_t i = 0; i <= fits; ++i) weights.push_back(torch::zeros({n, k}));
  const auto x = torch::ones({4, k});
  PackedWeights set;
  for (int64_t i = 0; i < fits; ++i)
    EXPECT_TRUE(packed_decode_product(x, weights[static_cast<size_t>(i)], false).defined());
  EXPECT_FALSE(packed_decode_product(x, weights.back(), false).defined());
  EXPECT_LE(set.bytes(), kPackedBytesMax);
}
