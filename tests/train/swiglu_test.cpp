// The fused SwiGLU gate against libtorch's silu(gate) * up: outputs and both gradients in float32
// (lengths that are not multiples of the vector width, large magnitudes, NaN kept), bfloat16
// operands, and the fallback for other dtypes.
#include <gtest/gtest.h>

#include <cmath>

#include "support/tensor_diff.h"
#include "train/ops/swiglu.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

struct SwigluResult {
  Tensor out, dgate, dup;
};

SwigluResult run_swiglu(const Tensor& gate, const Tensor& up, const Tensor& grad, bool fused) {
  auto g = gate.detach().clone().requires_grad_(), u = up.detach().clone().requires_grad_();
  auto out = fused ? swiglu(g, u) : torch::silu(g) * u;
  out.backward(grad);
  return {out.detach(), g.grad(), u.grad()};
}

TEST(SwiGlu, MatchesSiluTimesUp) {
  for (int64_t n : {1, 7, 8, 4097, 3 * 2048 + 5}) {
    torch::manual_seed(n);
    auto gate = torch::randn({n}) * 6, up = torch::randn({n}), grad = torch::randn({n});
    ASSERT_TRUE(fused_swiglu_applies(gate, up));
    auto ours = run_swiglu(gate, up, grad, true), theirs = run_swiglu(gate, up, grad, false);
    // Elementwise float32: the kernel's exp and division round differently from libtorch's
    // silu, a few ulp; measured up to 9.6e-8 of the largest element (1e-6: 10x). A silu without
    // the sigmoid, or a swapped gate and up, is off by O(1).
    EXPECT_LE(gpulab::test::relative_diff(ours.out, theirs.out), 1e-6) << n;
    EXPECT_LE(gpulab::test::relative_diff(ours.dgate, theirs.dgate), 1e-6) << n;
    EXPECT_LE(gpulab::test::relative_diff(ours.dup, theirs.dup), 1e-6) << n;
  }
}

TEST(SwiGlu, ExtremesAndNaN) {
  auto gate = torch::tensor({-1000.0f, -90.0f, -20.0f, 0.0f, 20.0f, 90.0f, 1000.0f, NAN, 1.0f});
  auto up = torch::ones_like(gate), grad = torch::ones_like(gate);
  auto ours = run_swiglu(gate, up, grad, true), theirs = run_swiglu(gate, up, grad, false);
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const float o = ours.out[i].item<float>(), t = theirs.out[i].item<float>();
    if (std::isnan(t)) {
      EXPECT_TRUE(std::isnan(o)) << "element " << i;
      EXPECT_TRUE(std::isnan(ours.dgate[i].item<float>())) << "element " << i;
    } else {  // a few ulp as above (measured 4e-36: only the saturated ends differ at all)
      EXPECT_NEAR(o, t, 1e-6 * std::max(1.0f, std::abs(t))) << "element " << i;
      EXPECT_NEAR(ours.dgate[i].item<float>(), theirs.dgate[i].item<float>(), 1e-5)
          << "element " << i;
    }
  }
}

// bfloat16 operands: float32 arithmetic rounded once, so exactly the float32 kernel's result on
// the same values, rounded; vector tails and NaN included.
TEST(SwiGlu, Bf16IsTheFloatKernelRounded) {
  for (int64_t n : {5, 8, 4100}) {
    torch::manual_seed(n);
    auto gate = (torch::randn({n}) * 6).to(torch::kBFloat16);
    auto up = torch::randn({n}).to(torch::kBFloat16);
    auto grad = torch::randn({n}).to(torch::kBFloat16);
    gate[n / 2] = NAN;
    ASSERT_TRUE(fused_swiglu_applies(gate, up));
    auto ours = run_swiglu(gate, up, grad, true);
    auto wide =
        run_swiglu(gate.to(torch::kFloat), up.to(torch::kFloat), grad.to(torch::kFloat), true);
    ASSERT_EQ(ours.out.scalar_type(), torch::kBFloat16);
    auto same = [](const Tensor& a, const Tensor& b) {
      return torch::allclose(a.to(torch::kFloat), b.to(torch::kFloat), 0.0, 0.0, true);
    };
    EXPECT_TRUE(same(ours.out, wide.out.to(torch::kBFloat16))) << n;
    EXPECT_TRUE(same(ours.dgate, wide.dgate.to(torch::kBFloat16))) << n;
    EXPECT_TRUE(same(ours.dup, wide.dup.to(torch::kBFloat16))) << n;
    EXPECT_TRUE(std::isnan(ours.out[n / 2].item<float>()));
    // And libtorch's bf16 ops (which round silu and the product separately) to bf16 precision:
    // two roundings of 2^-9 of a value each, relative to the largest; 2e-2 leaves 5x.
    auto theirs = run_swiglu(gate, up, grad, false);
    auto finite = ours.out.isfinite();
    EXPECT_LE(gpulab::test::relative_diff(ours.out.masked_select(finite),
                                          theirs.out.masked_select(finite)),
              2e-2);
  }
}

TEST(SwiGlu, OtherDtypesTakeLibtorchOps) {
  auto gate = torch::randn({5}, torch::kDouble), up = torch::randn({5}, torch::kDouble);
  EXPECT_FALSE(fused_swiglu_applies(gate, up));
  EXPECT_TRUE(torch::equal(swiglu(gate, up), torch::silu(gate) * up));
}

}  // namespace
}  // namespace gpulab::train
