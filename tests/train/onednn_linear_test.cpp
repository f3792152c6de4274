// Float32 linear layers through oneDNN (train/ops/onednn_linear.h): the output and both gradients
// equal float64's within float32 rounding, for 2-D and batched inputs, a weight read transposed
// (GPT-2's Conv1D) and a frozen weight; taken only for float32 CPU products of 16 rows or more
// outside autocast with gpulab's kernels on; dense_linear adds a bias as libtorch's linear does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "avx2_kernels.h"
#include "float_rounding.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/onednn_linear.h"
#include "train/precision.h"

using namespace gpulab::train;

namespace {

// Forward and backward through onednn_linear against float64 autograd on the same values: the
// output within the product's bound; each gradient is a product too (k = the summed dimension).
void expect_matches_float64(const torch::Tensor& x0, const torch::Tensor& w0) {
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  const auto g = torch::randn_like(torch::nn::functional::linear(x0, w0));
  auto y = onednn_linear(x, w);
  y.backward(g);
  const int64_t k = w0.size(1), n = w0.size(0);
  const auto x2 = x0.reshape({-1, k}), g2 = g.reshape({-1, n});
  expect_within_rounding(y.reshape({-1, n}), x2, w0);
  expect_within_rounding(x.grad().reshape({-1, k}), g2, w0.t());
  expect_within_rounding(w.grad(), g2.t(), x2.t());
}

}  // namespace

TEST(OnednnLinear, OutputAndGradientsEqualFloat64WithinRounding) {
  if (!avx512_here()) GTEST_SKIP() << "no AVX-512: float32 linear layers keep libtorch's linear";
  torch::manual_seed(11);
  for (auto [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 8, 8},
                            {33, 47, 129},
                            {256, 256, 64},
                            {1024, 96, 768}}) {
    expect_matches_float64(torch::randn({rows, k}), torch::randn({n, k}));
    expect_matches_float64(torch::randn({2, rows, k}), torch::randn({n, k}));  // batched
    // GPT-2's Conv1D: the [in, out] weight read as its transpose, in place.
    expect_matches_float64(torch::randn({rows, k}), torch::randn({k, n}).t());
  }
}

TEST(OnednnLinear, AFrozenWeightGetsNoGradientAndTheInputStillDoes) {
  if (!avx512_here()) GTEST_SKIP() << "no AVX-512: float32 linear layers keep libtorch's linear";
  const auto w = torch::randn({24, 40});
  auto x = torch::randn({32, 40}).requires_grad_(true);
  onednn_linear(x, w).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  expect_within_rounding(x.grad(), torch::ones({32, 24}), w.t());
  EXPECT_FALSE(w.grad().defined());
}

TEST(OnednnLinear, TakesOnlyFloatCpuProductsOfEnoughRowsOutsideAutocast) {
  if (!avx512_here()) GTEST_SKIP() << "no AVX-512: float32 linear layers keep libtorch's linear";
  const auto w = torch::randn({8, 12}), x = torch::randn({kOnednnMinRows, 12});
  EXPECT_TRUE(onednn_linear_applies(x, w));
  EXPECT_TRUE(onednn_linear_applies(x.view({2, kOnednnMinRows / 2, 12}), w));
  EXPECT_FALSE(onednn_linear_applies(torch::randn({kOnednnMinRows - 1, 12}), w));
  EXPECT_FALSE(onednn_linear_applies(x.to(torch::kDouble), w.to(torch::kDouble)));
  EXPECT_FALSE(onednn_linear_applies(x.to(torch::kBFloat16), w.to(torch::kBFloat16)));
  EXPECT_FALSE(onednn_linear_applies(torch::randn({kOnednnMinRows, 11}), w));
  EXPECT_FALSE(onednn_linear_applies(torch::randn({12}), w)) << "a single vector";
  {
    AutocastGuard bf16(Precision::kBf16, torch::kCPU);  // autocast's product is a bf16 one
    EXPECT_FALSE(onednn_linear_applies(x, w));
  }
  set_cpu_kernels(false);
  EXPECT_FALSE(onednn_linear_applies(x, w));
  set_cpu_kernels(true);
}

TEST(OnednnLinear, DenseLinearAddsTheBiasAsLibtorchsLinear) {
  torch::manual_seed(3);
  auto x = torch::randn({40, 20}), w = torch::randn({10, 20}), b = torch::randn({10});
  const auto y = dense_linear(x, w, b);
  const auto expected = torch::nn::functional::linear(x.to(torch::kDouble), w.to(torch::kDouble),
                                                      b.to(torch::kDouble));
  EXPECT_TRUE(torch::allclose(y.to(torch::kDouble), expected, 1e-5, 1e-5));
  EXPECT_TRUE(dense_linear(x, w).sizes() == torch::IntArrayRef({40, 10}));
  // float64 takes libtorch's linear, exactly.
  EXPECT_TRUE(
      torch::equal(dense_linear(x.to(torch::kDouble), w.to(torch::kDouble)),
                   torch::nn::functional::linear(x.to(torch::kDouble), w.to(torch::kDouble))));
}
