// The fp32 linear layer on oneDNN's sgemm against libtorch's linear: output and both gradients
// for 2-D and 3-D inputs, the gradient in the weight's layout, and the cases it leaves to
// libtorch (autocast, other dtypes).
#include <gtest/gtest.h>

#include "train/ops/linear.h"
#include "train/ops/sgemm.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

TEST(Fp32Linear, MatchesLibtorchLinear) {
  if (!have_sgemm())
    GTEST_SKIP() << "built without oneDNN (GPULAB_WITH_DNNL=OFF, the default on the wheel): "
                    "libtorch's linear";
  for (auto sizes : {std::vector<int64_t>{33, 40}, std::vector<int64_t>{3, 17, 40}}) {
    torch::manual_seed(1);
    auto x = torch::randn(sizes).requires_grad_(), w = torch::randn({24, 40}).requires_grad_();
    auto grad = torch::randn(torch::linear(x, w).sizes());
    ASSERT_TRUE(fp32_linear_applies(x, w));
    auto ours = fp32_linear(x, w);
    auto ours_grads = torch::autograd::grad({ours}, {x, w}, {grad});
    auto theirs = torch::linear(x, w);
    auto their_grads = torch::autograd::grad({theirs}, {x, w}, {grad});
    EXPECT_EQ(ours.sizes(), theirs.sizes());
    EXPECT_LE(rel_diff(ours, theirs), 1e-6);
    EXPECT_LE(rel_diff(ours_grads[0], their_grads[0]), 1e-6);
    EXPECT_LE(rel_diff(ours_grads[1], their_grads[1]), 1e-6);
    EXPECT_EQ(ours_grads[1].strides(), w.strides());
  }
}

TEST(Fp32Linear, LeavesAutocastAndOtherDtypesToLibtorch) {
  auto x = torch::randn({4, 8}), w = torch::randn({3, 8});
  EXPECT_FALSE(fp32_linear_applies(x.to(torch::kDouble), w.to(torch::kDouble)));
  EXPECT_FALSE(fp32_linear_applies(x, torch::randn({3, 7})));
  AutocastGuard autocast(Precision::kBf16, torch::kCPU);
  EXPECT_FALSE(fp32_linear_applies(x, w));
}

}  // namespace
}  // namespace gpulab::train
