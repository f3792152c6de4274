// One query a row against the KV cache (train/ops/decode_attention.h): equal to
// at::scaled_dot_product_attention within float32 rounding with and without a padding mask, with
// grouped-query heads read in place and with the cache's strided views (room held past its
// length); a row that may attend to nothing gets zeros; taken only where it applies.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "avx2_kernels.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/decode_attention.h"

using namespace gpulab::train;

namespace {

// SDPA's answer, [B, 1, H * D], the key/value heads expanded for grouped queries.
torch::Tensor reference(const torch::Tensor& q, torch::Tensor k, torch::Tensor v,
                        const torch::Tensor& mask) {
  const int64_t rep = q.size(1) / k.size(1);
  k = k.repeat_interleave(rep, 1).to(torch::kDouble);
  v = v.repeat_interleave(rep, 1).to(torch::kDouble);
  const auto allowed = mask.defined() ? std::optional<torch::Tensor>(mask) : std::nullopt;
  const auto out =
      at::scaled_dot_product_attention(q.to(torch::kDouble), k, v, allowed, 0.0, false);
  return out.transpose(1, 2).reshape({q.size(0), 1, -1});
}

}  // namespace

TEST(DecodeAttention, EqualsScaledDotProductAttentionWithMasksGroupsAndCacheViews) {
  if (!avx2_kernels_here()) GTEST_SKIP() << "no AVX2 + FMA: decode steps keep libtorch's attention";
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  for (auto [heads, kv_heads, d] :
       {std::tuple<int64_t, int64_t, int64_t>{8, 8, 32}, {12, 2, 64}, {4, 1, 13}, {2, 2, 8}})
    for (int64_t s : {1, 5, 38}) {
      const int64_t b = 5, reserve = s + 7;
      const auto q = torch::randn({b, 1, heads, d}).transpose(1, 2);  // as the rotary leaves it
      // The cache: room for `reserve` positions, `s` of them written (KvCache::reserve).
      const auto keys = torch::randn({b, kv_heads, reserve, d}) * 2;
      const auto values = torch::randn({b, kv_heads, reserve, d});
      const auto k = keys.narrow(2, 0, s), v = values.narrow(2, 0, s);
      auto mask = torch::rand({b, 1, 1, s}) > 0.3;
      mask.select(3, s - 1).fill_(true);  // each row sees its own new token
      for (const auto& m : {torch::Tensor(), mask}) {
        ASSERT_TRUE(decode_attention_applies(q, k, v, m));
        const auto got = decode_attention(q, k, v, m).to(torch::kDouble);
        const auto want = reference(q, k, v, m);
        EXPECT_LT((got - want).abs().max().item<double>(), 1e-5)
            << "heads " << heads << "/" << kv_heads << " d " << d << " s " << s
            << (m.defined() ? " masked" : "");
      }
    }
}

TEST(DecodeAttention, ARowThatMayAttendToNothingGetsZeros) {
  if (!avx2_kernels_here()) GTEST_SKIP() << "no AVX2 + FMA: decode steps keep libtorch's attention";
  torch::NoGradGuard no_grad;
  const auto q = torch::randn({2, 2, 1, 8}), k = torch::randn({2, 2, 4, 8}),
             v = torch::randn({2, 2, 4, 8});
  auto mask = torch::ones({2, 1, 1, 4}, torch::kBool);
  mask[1].fill_(false);
  const auto out = decode_attention(q, k, v, mask);
  EXPECT_TRUE(out[1].eq(0).all().item<bool>());
  EXPECT_TRUE(out[0].isfinite().all().item<bool>());
}

TEST(DecodeAttention, TakesOnlyOneFloatQueryARowOutsideAutograd) {
  if (!avx2_kernels_here()) GTEST_SKIP() << "no AVX2 + FMA: decode steps keep libtorch's attention";
  const auto q = torch::randn({2, 4, 1, 8}), k = torch::randn({2, 2, 6, 8}),
             v = torch::randn({2, 2, 6, 8});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(decode_attention_applies(q, k, v, {}));
  EXPECT_FALSE(decode_attention_applies(torch::randn({2, 4, 2, 8}), k, v, {}));  // two queries
  EXPECT_FALSE(decode_attention_applies(q.to(torch::kDouble), k.to(torch::kDouble),
                                        v.to(torch::kDouble), {}));
  EXPECT_FALSE(decode_attention_applies(torch::randn({2, 3, 1, 8}), k, v, {}));  // 2 kv heads, 3 q
  EXPECT_FALSE(decode_attention_applies(q, k, v, torch::ones({2, 1, 1, 6})));    // not a bool mask
  EXPECT_FALSE(decode_attention_applies(q, k.transpose(2, 3).contiguous().transpose(2, 3), v, {}));
  set_cpu_kernels(false);
  EXPECT_FALSE(decode_attention_applies(q, k, v, {}));
  set_cpu_kernels(true);
  torch::AutoGradMode grad(true);
  EXPECT_FALSE(decode_attention_applies(q.clone().requires_grad_(true), k, v, {}));
}
