// The fused RMSNorm against libtorch's ops (the unfused Llama arithmetic written out here): output
// and both gradients in float32 for row lengths that are and are not multiples of the vector
// width; a bfloat16 result and bfloat16 input; the weight gradient the same whatever the thread
// count; float64 left to libtorch.
#include <gtest/gtest.h>

#include "support/tensor_diff.h"
#include "train/ops/rms_norm.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

Tensor unfused(const Tensor& x, const Tensor& w, double eps) {
  auto xf = x.to(torch::kFloat);
  return w * (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps));
}

struct RmsNormResult {
  Tensor y, dx, dw;
};

RmsNormResult run_rms_norm(const Tensor& x, const Tensor& w, const Tensor& grad, bool fused,
                           torch::ScalarType result = torch::kFloat) {
  auto xs = x.detach().clone().requires_grad_(), ws = w.detach().clone().requires_grad_();
  auto y = fused ? rms_norm(xs, ws, 1e-5, result) : unfused(xs, ws, 1e-5);
  y.backward(grad.to(y.scalar_type()));
  return {y.detach(), xs.grad(), ws.grad()};
}

TEST(RmsNorm, MatchesLibtorchOps) {
  for (auto [rows, d] : {std::pair<int64_t, int64_t>{1, 8}, {5, 13}, {70, 768}, {1030, 64}}) {
    torch::manual_seed(rows + d);
    auto x = torch::randn({rows, d}) * 3, w = torch::rand({d}) + 0.5;
    auto grad = torch::randn({rows, d});
    ASSERT_TRUE(fused_rms_norm_applies(x, w, torch::kFloat));
    auto ours = run_rms_norm(x, w, grad, true), theirs = run_rms_norm(x, w, grad, false);
    // float32 sums of d squares (and of the rows, for dw) in another order: measured up to
    // 1.7e-7 (y), 2.1e-7 (dx) and 1.7e-7 (dw) of each tensor's largest element. 1e-6 and 1e-5
    // leave 5x and 50x (dx and dw sum over up to 1,030 rows on any thread split); a missing eps
    // or a mean over d - 1 is off by 1e-3 or more.
    EXPECT_LE(gpulab::test::relative_diff(ours.y, theirs.y), 1e-6) << rows << "x" << d;
    EXPECT_LE(gpulab::test::relative_diff(ours.dx, theirs.dx), 1e-5) << rows << "x" << d;
    EXPECT_LE(gpulab::test::relative_diff(ours.dw, theirs.dw), 1e-5) << rows << "x" << d;
  }
}

TEST(RmsNorm, Bf16ResultIsTheFloatResultRoundedOnce) {
  torch::manual_seed(3);
  auto x = torch::randn({2, 9, 40}), w = torch::rand({40}) + 0.5;
  auto grad = torch::randn({2, 9, 40}).to(torch::kBFloat16);
  auto as_float = run_rms_norm(x, w, grad.to(torch::kFloat), true);
  auto as_bf16 = run_rms_norm(x, w, grad, true, torch::kBFloat16);
  ASSERT_EQ(as_bf16.y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(as_bf16.y, as_float.y.to(torch::kBFloat16)));
  // The same incoming gradient values: the same float32 input gradients.
  EXPECT_TRUE(torch::equal(as_bf16.dx, as_float.dx));
  EXPECT_TRUE(torch::equal(as_bf16.dw, as_float.dw));
  EXPECT_EQ(as_bf16.dx.scalar_type(), torch::kFloat);
}

TEST(RmsNorm, Bf16Input) {
  torch::manual_seed(4);
  auto x = (torch::randn({33, 24}) * 2).to(torch::kBFloat16), w = torch::rand({24}) + 0.5;
  auto grad = torch::randn({33, 24});
  auto ours = run_rms_norm(x, w, grad, true),
       theirs = run_rms_norm(x.to(torch::kFloat), w, grad, false);
  EXPECT_EQ(ours.dx.scalar_type(), torch::kBFloat16);
  EXPECT_LE(gpulab::test::relative_diff(ours.y, theirs.y), 1e-6);
  // One bfloat16 rounding of dx (2^-9 = 2e-3 of a value; measured 2.3e-3 of the largest).
  EXPECT_LE(gpulab::test::relative_diff(ours.dx, theirs.dx), 1e-2);
  EXPECT_LE(gpulab::test::relative_diff(ours.dw, theirs.dw), 1e-5);
}

TEST(RmsNorm, WeightGradientIndependentOfThreads) {
  torch::manual_seed(5);
  auto x = torch::randn({3000, 48}), w = torch::rand({48}), grad = torch::randn({3000, 48});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = run_rms_norm(x, w, grad, true);
  at::set_num_threads(std::max(2, threads));
  auto many = run_rms_norm(x, w, grad, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one.dw, many.dw));
  EXPECT_TRUE(torch::equal(one.dx, many.dx));
}

TEST(RmsNorm, Float64TakesLibtorchOps) {
  auto x = torch::randn({2, 4}, torch::kDouble), w = torch::ones({4}, torch::kDouble);
  EXPECT_FALSE(fused_rms_norm_applies(x, w, torch::kDouble));
  EXPECT_FALSE(fused_rms_norm_applies(x.to(torch::kFloat), w, torch::kFloat));
}

}  // namespace
}  // namespace gpulab::train
