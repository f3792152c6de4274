// A linear layer's weight gradient in gpulab's AVX-512 kernels (train/ops/weight_grad.h) and the
// bf16 layer that uses it (train/ops/bf16_linear.h): float32 and bf16 operands summed in float32
// within float32's product bound of float64, at shapes with partial tiles, several blocks of
// batch rows, an odd count of them (bf16 pairs) and strided operands; what each takes; and the
// bf16 layer equal to autocast's linear but for the weight's gradient, which is float32.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "avx2_kernels.h"
#include "float_rounding.h"
#include "train/ops/bf16_linear.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/weight_grad.h"
#include "train/precision.h"

using namespace gpulab::train;

namespace {

// dY^T X by weight_grad against float64 on the same values (bf16 values are exact in float64).
void expect_weight_grad_within_rounding(const torch::Tensor& dy, const torch::Tensor& x) {
  ASSERT_TRUE(weight_grad_applies(dy, x));
  const auto gw = weight_grad(dy, x);
  ASSERT_EQ(gw.scalar_type(), torch::kFloat);
  ASSERT_EQ(gw.sizes(), torch::IntArrayRef({dy.size(1), x.size(1)}));
  // expect_within_rounding(y, a, b) holds y to a b^T: here a = dY^T, b = X^T, summed over rows.
  expect_within_rounding(gw, dy.t().to(torch::kFloat), x.t().to(torch::kFloat));
}

// Shapes (rows, out, in): one element; partial tiles on both sides; rows over one block (512),
// odd; the output layer's width in columns; two blocks of bf16 rows and an odd third; more dW rows
// per thread than one packed band of dY (192).
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kShapes{
    {1, 1, 1},      {7, 5, 3},       {33, 13, 77},  {513, 70, 130},
    {1100, 12, 64}, {300, 200, 768}, {2051, 9, 20}, {70, 400, 40}};

}  // namespace

TEST(WeightGrad, Float32EqualsFloat64WithinRounding) {
  if (!avx512_here()) GTEST_SKIP() << "no AVX-512: the weight gradient stays libtorch's mm (MKL)";
  torch::manual_seed(5);
  for (auto [rows, out, in] : kShapes) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << out << " x " << in);
    expect_weight_grad_within_rounding(torch::randn({rows, out}), torch::randn({rows, in}));
  }
  // Strided operands: each read through its transposed storage.
  expect_weight_grad_within_rounding(torch::randn({40, 600}).t(), torch::randn({70, 600}).t());
}

TEST(WeightGrad, Bfloat16ProductsSummedInFloat32) {
  if (!avx512_bf16_here()) GTEST_SKIP() << "no AVX-512 BF16: bf16 layers keep autocast's";
  torch::manual_seed(6);
  for (auto [rows, out, in] : kShapes) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << out << " x " << in);
    const auto dy = torch::randn({rows, out}).to(torch::kBFloat16);
    const auto x = torch::randn({rows, in}).to(torch::kBFloat16);
    expect_weight_grad_within_rounding(dy, x);
  }
  // The last of an odd count of rows has no partner in its pair: a dropped row would show here.
  const auto dy = torch::zeros({3, 16}, torch::kBFloat16),
             x = torch::zeros({3, 64}, torch::kBFloat16);
  dy[2].fill_(2.0);
  x[2].fill_(3.0);
  EXPECT_TRUE(torch::equal(weight_grad(dy, x), torch::full({16, 64}, 6.0f)));
}

TEST(WeightGrad, NoRowsGiveZeros) {
  if (!avx512_here()) GTEST_SKIP() << "no AVX-512: the weight gradient stays libtorch's mm (MKL)";
  EXPECT_TRUE(
      torch::equal(weight_grad(torch::ones({0, 4}), torch::ones({0, 9})), torch::zeros({4, 9})));
  EXPECT_EQ(weight_grad(torch::ones({5, 0}), torch::ones({5, 9})).sizes(),
            torch::IntArrayRef({0, 9}));
}

TEST(WeightGrad, TakesTwoDimensionalFloatOrBf16PairsOfEqualRows) {
  if (!avx512_here()) GTEST_SKIP() << "no AVX-512: the weight gradient stays libtorch's mm (MKL)";
  const auto dy = torch::randn({8, 4}), x = torch::randn({8, 6});
  EXPECT_TRUE(weight_grad_applies(dy, x));
  EXPECT_EQ(weight_grad_applies(dy.to(torch::kBFloat16), x.to(torch::kBFloat16)),
            avx512_bf16_here());
  EXPECT_FALSE(weight_grad_applies(dy, x.to(torch::kBFloat16))) << "mixed types";
  EXPECT_FALSE(weight_grad_applies(dy.to(torch::kDouble), x.to(torch::kDouble)));
  EXPECT_FALSE(weight_grad_applies(dy.view({2, 4, 4}), x));
  EXPECT_FALSE(weight_grad_applies(dy, torch::randn({9, 6}))) << "unequal rows";
  EXPECT_THROW(weight_grad(dy, torch::randn({9, 6})), c10::Error);
  set_cpu_kernels(false);
  EXPECT_FALSE(weight_grad_applies(dy, x));
  set_cpu_kernels(true);
}

TEST(Bf16Linear, AutocastsLinearButForAFloat32WeightGradient) {
  if (!avx512_bf16_here()) GTEST_SKIP() << "no AVX-512 BF16: bf16 layers keep autocast's";
  torch::manual_seed(8);
  const auto x0 = torch::randn({2, 45, 96}), w0 = torch::randn({40, 96});
  const auto g = torch::randn({2, 45, 40}).to(torch::kBFloat16);
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  auto xr = x0.clone().requires_grad_(true), wr = w0.clone().requires_grad_(true);
  torch::Tensor y, yr;
  {
    AutocastGuard bf16(Precision::kBf16, torch::kCPU);
    ASSERT_TRUE(bf16_linear_applies(x, w));
    y = bf16_linear(x, w);
    yr = torch::nn::functional::linear(xr, wr);
  }
  ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, yr)) << "the same bf16 product as autocast's";
  y.backward(g);
  yr.backward(g);
  ASSERT_EQ(x.grad().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(x.grad(), xr.grad())) << "the input's gradient as autocast's";
  ASSERT_EQ(w.grad().scalar_type(), torch::kFloat);
  // The float32 sum of the bf16 products, where autocast's is that sum rounded to bf16.
  const auto g2 = g.reshape({-1, 40}).to(torch::kFloat);
  const auto x2 = x0.reshape({-1, 96}).to(torch::kBFloat16).to(torch::kFloat);
  expect_within_rounding(w.grad(), g2.t(), x2.t());
  // Autocast's within a bf16 rounding (2^-8 relative) of it, and float32 summation order.
  EXPECT_TRUE(torch::allclose(w.grad(), wr.grad(), 1.0 / 256, 1e-3));
  EXPECT_FALSE(torch::equal(w.grad(), wr.grad())) << "autocast's is rounded to bf16";
}

TEST(Bf16Linear, TakesBiasFreeFloatWeightsUnderCpuBf16Autocast) {
  if (!avx512_bf16_here()) GTEST_SKIP() << "no AVX-512 BF16: bf16 layers keep autocast's";
  const auto x = torch::randn({4, 8}), w = torch::randn({3, 8}).requires_grad_(true);
  EXPECT_FALSE(bf16_linear_applies(x, w)) << "no autocast";
  AutocastGuard bf16(Precision::kBf16, torch::kCPU);
  EXPECT_TRUE(bf16_linear_applies(x, w));
  EXPECT_FALSE(bf16_linear_applies(x, w.detach())) << "a frozen weight: autocast's cached copy";
  {
    torch::NoGradGuard no_grad;  // a generation's steps
    EXPECT_FALSE(bf16_linear_applies(x, w));
  }
  EXPECT_TRUE(bf16_linear_applies(x.to(torch::kBFloat16), w));
  EXPECT_FALSE(bf16_linear_applies(x, w.to(torch::kBFloat16).detach().requires_grad_(true)))
      << "a bf16 weight: nothing to widen";
  EXPECT_FALSE(bf16_linear_applies(x.to(torch::kDouble), w));
  EXPECT_FALSE(bf16_linear_applies(torch::randn({4, 7}), w));
  EXPECT_FALSE(bf16_linear_applies(torch::randn({8}), w)) << "a single vector";
  set_cpu_kernels(false);
  EXPECT_FALSE(bf16_linear_applies(x, w));
  set_cpu_kernels(true);
}
