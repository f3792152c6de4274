// bf16 products through the fp32 GEMM against libtorch's own bf16 autocast: the same values and
// gradients up to summation order, bf16 results, and the ordinary ops outside CPU bf16 autocast.
// The fp32-GEMM products are called directly, so the check runs on a CPU whose libtorch would
// not pick them too (AVX-512); which one the dispatch picks here is checked separately.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "train/models/cpu_bf16_matmul.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

const torch::Device kCpu(torch::kCPU);

double relative(const torch::Tensor& got, const torch::Tensor& want) {
  auto g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  return ((g - w).norm() / w.norm()).item<double>();
}

struct ProductResult {
  torch::Tensor out, grad_a, grad_b;
};

// One product and its backward, with a fixed upstream gradient.
template <class Product>
ProductResult run_product(Product product, torch::Tensor a, torch::Tensor b, bool bf16) {
  a = a.clone().requires_grad_(true);
  b = b.clone().requires_grad_(true);
  torch::Tensor out;
  {
    AutocastGuard autocast(bf16 ? Precision::kBf16 : Precision::kFp32, kCpu);
    out = product(a, b);
  }
  torch::manual_seed(7);
  out.backward(torch::randn(out.sizes()).to(out.scalar_type()));
  return {out.detach(), a.grad(), b.grad()};
}

// bf16 has an 8-bit significand: one rounding of a result is up to 2^-9 relative; summation
// order differs between the two GEMMs, so a few roundings apart at most.
constexpr double kBf16Tolerance = 1e-2;

TEST(CpuBf16Matmul, LinearMatchesAutocast) {
  torch::manual_seed(0);
  auto x = torch::randn({3, 17, 48}), w = torch::randn({40, 48});
  auto ours = run_product(bf16_linear_on_fp32_gemm, x, w, true);
  auto theirs =
      run_product([](auto& a, auto& b) { return torch::nn::functional::linear(a, b); }, x, w, true);
  EXPECT_EQ(ours.out.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(ours.out.scalar_type(), theirs.out.scalar_type());
  EXPECT_EQ(ours.grad_b.scalar_type(), torch::kFloat);  // the master weight's gradient
  EXPECT_LT(relative(ours.out, theirs.out), kBf16Tolerance);
  EXPECT_LT(relative(ours.grad_a, theirs.grad_a), kBf16Tolerance);
  EXPECT_LT(relative(ours.grad_b, theirs.grad_b), kBf16Tolerance);
  // And it is bf16 arithmetic, not fp32: the fp32 product differs by more than fp32 rounding.
  auto fp32 = torch::nn::functional::linear(x, w);
  EXPECT_GT(relative(ours.out, fp32), 1e-4);
}

TEST(CpuBf16Matmul, BatchedMatmulMatchesAutocast) {
  torch::manual_seed(1);
  auto a = torch::randn({2, 4, 9, 16}), b = torch::randn({2, 4, 16, 11});
  auto ours = run_product(bf16_matmul_on_fp32_gemm, a, b, true);
  auto theirs = run_product([](auto& p, auto& q) { return torch::matmul(p, q); }, a, b, true);
  EXPECT_EQ(ours.out.scalar_type(), torch::kBFloat16);
  EXPECT_LT(relative(ours.out, theirs.out), kBf16Tolerance);
  EXPECT_LT(relative(ours.grad_a, theirs.grad_a), kBf16Tolerance);
  EXPECT_LT(relative(ours.grad_b, theirs.grad_b), kBf16Tolerance);
}

TEST(CpuBf16Matmul, OutsideBf16AutocastTheOrdinaryOps) {
  torch::manual_seed(2);
  auto x = torch::randn({5, 8}, torch::kDouble), w = torch::randn({6, 8}, torch::kDouble);
  auto ours = run_product(linear_product, x, w, false);
  auto theirs = run_product([](auto& a, auto& b) { return torch::nn::functional::linear(a, b); }, x,
                            w, false);
  EXPECT_TRUE(torch::equal(ours.out, theirs.out));
  EXPECT_TRUE(torch::equal(ours.grad_b, theirs.grad_b));
  // float64 under bf16 autocast stays float64, as autocast leaves it.
  auto under = run_product(linear_product, x, w, true);
  EXPECT_EQ(under.out.scalar_type(), torch::kDouble);
}

// Under bf16 autocast the dispatch takes the fp32-GEMM product exactly where libtorch's own bf16
// GEMM is the slow loop: bitwise its result there, libtorch's (autocast's) elsewhere.
TEST(CpuBf16Matmul, DispatchFollowsTheCpu) {
  torch::manual_seed(3);
  auto x = torch::randn({7, 32}), w = torch::randn({12, 32});
  torch::Tensor picked, fp32_gemm, autocast;
  {
    AutocastGuard guard(Precision::kBf16, kCpu);
    picked = linear_product(x, w);
    fp32_gemm = bf16_linear_on_fp32_gemm(x, w);
    autocast = torch::nn::functional::linear(x, w);
  }
  EXPECT_TRUE(torch::equal(picked, cpu_bf16_gemm_is_slow() ? fp32_gemm : autocast))
      << "slow bf16 GEMM on this CPU: " << cpu_bf16_gemm_is_slow();
}

}  // namespace
}  // namespace gpulab::train
