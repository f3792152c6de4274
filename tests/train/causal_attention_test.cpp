// The fused CPU attention kernel against the unfused Llama attention arithmetic written out here
// (rotate, product, scale, causal mask, softmax, product, grouped heads): outputs and the
// gradients of q, k and v, in float64 (to rounding) and float32, odd lengths and row blocks
// included; and the Llama model giving the same logits and gradients as on
// scaled_dot_product_attention.
#include <gtest/gtest.h>

#include <cmath>

#include "support/tensor_diff.h"
#include "train/llama_attention_paths.h"
#include "train/models/llama/llama.h"
#include "train/ops/batched_attention.h"
#include "train/ops/causal_attention.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

Tensor rotate_half(const Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// The plain computation on B x T x (H * D) projections.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                 const Tensor& sin, int64_t heads, int64_t kv_heads, bool causal = true) {
  const int64_t b = q.size(0), t = q.size(1), d = q.size(2) / heads;
  auto split = [&](const Tensor& x, int64_t h) { return x.view({b, t, h, d}).transpose(1, 2); };
  auto c = cos.to(q.scalar_type()), s = sin.to(q.scalar_type());
  auto qh = split(q, heads), kh = split(k, kv_heads), vh = split(v, kv_heads);
  qh = qh * c + rotate_half(qh) * s;
  kh = kh * c + rotate_half(kh) * s;
  kh = kh.repeat_interleave(heads / kv_heads, 1);
  vh = vh.repeat_interleave(heads / kv_heads, 1);
  auto scores = torch::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  auto hidden = torch::ones({t, t}, torch::kBool).triu(causal ? 1 : t);
  auto probs = torch::softmax(scores.masked_fill(hidden, -INFINITY), -1);
  return torch::matmul(probs, vh).transpose(1, 2).reshape({b, t, heads * d});
}

void expect_same(int64_t b, int64_t t, int64_t heads, int64_t kv_heads, int64_t d,
                 torch::ScalarType dtype, double tolerance) {
  torch::manual_seed(7);
  auto opts = torch::TensorOptions().dtype(dtype);
  auto q = torch::randn({b, t, heads * d}, opts).requires_grad_();
  auto k = torch::randn({b, t, kv_heads * d}, opts).requires_grad_();
  auto v = torch::randn({b, t, kv_heads * d}, opts).requires_grad_();
  auto [cos, sin] = rotary_tables(d, 10000.0, 0, t, torch::kCPU);
  auto grad = torch::randn({b, t, heads * d}, opts);
  ASSERT_TRUE(fused_causal_attention_applies(q));

  auto ours = fused_causal_attention(q, k, v, cos, sin, heads, kv_heads);
  auto ours_grads = torch::autograd::grad({ours}, {q, k, v}, {grad});
  // The reference in float64 whatever the dtype under test.
  auto q64 = q.detach().to(torch::kDouble).requires_grad_();
  auto k64 = k.detach().to(torch::kDouble).requires_grad_();
  auto v64 = v.detach().to(torch::kDouble).requires_grad_();
  auto theirs = reference(q64, k64, v64, cos, sin, heads, kv_heads);
  auto their_grads = torch::autograd::grad({theirs}, {q64, k64, v64}, {grad.to(torch::kDouble)});

  const std::string what = "b" + std::to_string(b) + " t" + std::to_string(t) + " heads " +
                           std::to_string(heads) + "/" + std::to_string(kv_heads) + " d" +
                           std::to_string(d) + " " + c10::toString(dtype);
  EXPECT_LE(gpulab::test::relative_diff(ours, theirs), tolerance) << what << " output";
  const char* names[] = {"dq", "dk", "dv"};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LE(gpulab::test::relative_diff(ours_grads[i], their_grads[i]), tolerance)
        << what << " " << names[i];
}

// float64: measured up to 2.3e-15 of each tensor's largest element (sums over up to 300
// positions); 1e-12 is 400x, and a wrong mask, scale or rotary position is off by O(0.1).
TEST(CausalAttention, MatchesThePlainArithmeticInFloat64) {
  expect_same(2, 17, 4, 4, 8, torch::kDouble, 1e-12);    // shorter than a row block
  expect_same(3, 300, 6, 2, 16, torch::kDouble, 1e-12);  // three row blocks, grouped heads
  expect_same(1, 128, 4, 1, 4, torch::kDouble, 1e-12);   // exactly one block, one kv head
}

TEST(CausalAttention, MatchesThePlainArithmeticInFloat32) {
  // float32 against the float64 reference: measured up to 5.3e-7 (1e-5: 20x).
  expect_same(2, 257, 12, 4, 64, torch::kFloat, 1e-5);  // llama-125m's heads, a block + 1 row
}

TEST(CausalAttention, ANegativeControlFails) {
  // The check above can fail: against attention without the causal mask it is far off.
  torch::manual_seed(3);
  auto q = torch::randn({1, 20, 16}, torch::kDouble), k = torch::randn({1, 20, 16}, torch::kDouble);
  auto v = torch::randn({1, 20, 16}, torch::kDouble);
  auto [cos, sin] = rotary_tables(8, 10000.0, 0, 20, torch::kCPU);
  auto ours = fused_causal_attention(q, k, v, cos, sin, 2, 2);
  EXPECT_LE(gpulab::test::relative_diff(ours, reference(q, k, v, cos, sin, 2, 2)), 1e-12);
  EXPECT_GT(gpulab::test::relative_diff(ours, reference(q, k, v, cos, sin, 2, 2, false)), 1e-2);
}

TEST(CausalAttention, LlamaGivesTheSameLogitsAndGradientsOnEitherPath) {
  // float64, two blocks: measured 1.1e-15 (logits) and up to 2.2e-15 (gradients).
  const double diff = compare_llama_attention_paths(40, [](LlamaForCausalLM& model, bool fused) {
    model.set_fused_attention(fused);
    set_batched_attention(fused);  // the other path: sdpa, not the batched attention
  });
  set_batched_attention(true);
  EXPECT_LE(diff, 1e-12);
}

}  // namespace
}  // namespace gpulab::train
