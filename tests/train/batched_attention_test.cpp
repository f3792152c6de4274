// gpulab's batched causal attention against at::scaled_dot_product_attention (is_causal): the
// output and the gradients of q, k and v in float64 (to rounding), float32 and bfloat16 (against
// the float64 result), at lengths that are not multiples of the vector width, in one row block and
// two (of equal and unequal rows); when it applies
// (the switches, dtypes, the probabilities' byte cap); and a Llama model's logits and gradients
// equal on either path.
#include <gtest/gtest.h>

#include "support/tensor_diff.h"
#include "train/attention_grads.h"
#include "train/llama_attention_paths.h"
#include "train/models/llama/llama.h"
#include "train/ops/batched_attention.h"
#include "train/ops/cpu_kernels.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

AttentionGrads run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad,
                   bool batched) {
  auto a = q.detach().clone().requires_grad_(), b = k.detach().clone().requires_grad_(),
       c = v.detach().clone().requires_grad_();
  auto out = batched ? batched_causal_attention(a, b, c)
                     : at::scaled_dot_product_attention(a, b, c, {}, 0.0, true);
  out.backward(grad);
  return {out.detach(), a.grad(), b.grad(), c.grad()};
}

// q, k, v and an output gradient, B x H x T x D, float64; scores of a few units (as trained
// models have) so that the softmax is neither flat nor one-hot.
std::array<Tensor, 4> operands(int64_t b, int64_t h, int64_t t, int64_t d) {
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  return {torch::randn({b, h, t, d}, opts) * 1.5, torch::randn({b, h, t, d}, opts) * 1.5,
          torch::randn({b, h, t, d}, opts), torch::randn({b, h, t, d}, opts)};
}

TEST(BatchedAttention, Float64EqualsSdpa) {
  for (int64_t t : {2, 7, 9, 33, 128, 131, 300}) {  // 128 up: two row blocks, 300: four
    torch::manual_seed(t);
    auto [q, k, v, g] = operands(2, 3, t, 8);
    ASSERT_TRUE(batched_attention_applies(q, k));
    // Both sides in float64: only the order of sums differs (measured 1.5e-16 to 3.0e-15; a wrong
    // mask, a missing scale or a swapped gradient is off by O(1)).
    expect_attention_close(run(q, k, v, g, true), run(q, k, v, g, false), 1e-12,
                           "T " + std::to_string(t));
  }
}

TEST(BatchedAttention, Float32AndBfloat16AgainstFloat64) {
  for (int64_t t : {37, 150}) {  // one row block, two
    torch::manual_seed(t);
    auto [q, k, v, g] = operands(2, 4, t, 16);
    const auto exact = run(q, k, v, g, false);
    const std::string at = ", T " + std::to_string(t);
    // float32: products on the BLAS and the AVX2 exp (measured 1.5e-7 to 5.3e-7 of each result's
    // largest element; sdpa's own float32 1.9e-7 to 5.7e-7, held to the same bound beside it).
    for (bool batched : {true, false}) {
      auto f = [](const Tensor& x) { return x.to(torch::kFloat); };
      expect_attention_close(run(f(q), f(k), f(v), f(g), batched), exact, 1e-5,
                             (batched ? "float32, batched" : "float32, sdpa") + at);
    }
    // bfloat16: scores, probabilities and products rounded to bfloat16's 3.9e-3 between the
    // passes (as eager attention under autocast rounds them); each gradient is a few such
    // roundings deep. Measured 5.6e-3 to 9.4e-3.
    auto bf = [](const Tensor& x) { return x.to(torch::kBFloat16); };
    auto r = run(bf(q), bf(k), bf(v), bf(g), true);
    ASSERT_EQ(r.out.scalar_type(), torch::kBFloat16);
    auto wide = [](const Tensor& x) { return x.to(torch::kDouble); };
    expect_attention_close({wide(r.out), wide(r.dq), wide(r.dk), wide(r.dv)}, exact, 3e-2,
                           "bfloat16" + at);
  }
}

TEST(BatchedAttention, AppliesOnlyWhereItShould) {
  auto q = torch::randn({1, 2, 8, 4});
  EXPECT_TRUE(batched_attention_applies(q, q));
  EXPECT_FALSE(batched_attention_applies(q.to(torch::kHalf), q.to(torch::kHalf)));
  EXPECT_FALSE(batched_attention_applies(q.narrow(2, 0, 1), q.narrow(2, 0, 1)));  // one position
  EXPECT_FALSE(batched_attention_applies(q, q.narrow(2, 0, 4)));  // keys of another length
  // 16 MiB of float32 probabilities is 2048 x 2048 for one head: one more position is over.
  auto big = torch::empty({1, 1, 2048, 1});
  EXPECT_TRUE(batched_attention_applies(big, big));
  auto over = torch::empty({1, 1, 2049, 1});
  EXPECT_FALSE(batched_attention_applies(over, over));
  set_batched_attention(false);
  EXPECT_FALSE(batched_attention_applies(q, q));
  set_batched_attention(true);
  set_cpu_kernels(false);
  EXPECT_FALSE(batched_attention_applies(q, q));
  set_cpu_kernels(true);
  EXPECT_TRUE(batched_attention_applies(q, q));
}

// The whole model on either path (the switch read in attention_core.cpp): the same logits and
// gradients in float64, grouped-query heads included.
TEST(BatchedAttention, LlamaSameOnEitherPath) {
  const double diff = compare_llama_attention_paths(19, [](LlamaForCausalLM& model, bool batched) {
    model.set_fused_attention(false);  // the rotary kernel is the model's own default
    set_batched_attention(batched);
  });
  set_batched_attention(true);
  // Measured ~1e-16: float64 sums in another order. Exactly 0 would mean one path ran twice.
  EXPECT_LE(diff, 1e-12);
  EXPECT_GT(diff, 0.0) << "the switch did not change the attention's path";
}

}  // namespace
}  // namespace gpulab::train
