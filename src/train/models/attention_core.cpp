// Causal attention after the projections: cache, grouped-query expansion, the product (see .h).
#include "train/models/attention_core.h"

#include "train/ops/batched_attention.h"
#include "train/ops/causal_attention.h"
#include "train/ops/decode_attention.h"

namespace gpulab::train {
namespace {

// q: B x H x T x D; k, v: B x H x S x D, where the last T of the S key positions are the
// queries' own. Causal: query i sees keys up to S - T + i; with a padding mask (B x 1 x T x S,
// KvCache::attend), those of its row's that the mask allows. `cached`: generation's (its tokens
// are compared with transformers', so it keeps sdpa's float32 scores).
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& mask, bool cached) {
  if (mask.defined()) return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false);
  const int64_t t = q.size(2), s = k.size(2);
  if (!cached && t == s && batched_attention_applies(q, k))
    return batched_causal_attention(q, k, v);
  // The fused kernels (flash / memory-efficient on GPUs, flash on the CPU). Its is_causal aligns
  // the mask to the top left, which is right only without earlier positions; one new token sees
  // everything.
  if (t == s || t == 1) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, t == s && t > 1);
  auto allowed = torch::ones({t, s}, q.options().dtype(torch::kBool)).tril(s - t);
  return at::scaled_dot_product_attention(q, k, v, allowed, 0.0, false);
}

}  // namespace

torch::ScalarType at_least_float(torch::ScalarType t) {
  return t == torch::kDouble ? torch::kDouble : torch::kFloat;
}

torch::Tensor causal_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v,
                               KvCache* cache, int64_t layer) {
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), head_dim = q.size(3);
  const int64_t kv_heads = k.size(1);
  if (cache != nullptr) {
    auto& ck = cache->keys[static_cast<size_t>(layer)];
    auto& cv = cache->values[static_cast<size_t>(layer)];
    ck = k = append_positions(ck, k, cache->reserve);
    cv = v = append_positions(cv, v, cache->reserve);
    // A decode step (one new token a row): gpulab's kernel reads the cache as it lies.
    if (t == 1 && decode_attention_applies(q, k, v, cache->attend))
      return decode_attention(q, k, v, cache->attend);
  }
  if (kv_heads != heads) {
    // Grouped-query attention: key/value head j serves query heads j*rep .. (j+1)*rep - 1.
    const int64_t rep = heads / kv_heads, s = k.size(2);
    k = k.unsqueeze(2).expand({b, kv_heads, rep, s, head_dim}).reshape({b, heads, s, head_dim});
    v = v.unsqueeze(2).expand({b, kv_heads, rep, s, head_dim}).reshape({b, heads, s, head_dim});
  }
  auto out = attend(q, k.to(q.scalar_type()), v.to(q.scalar_type()),
                    cache != nullptr ? cache->attend : torch::Tensor(), cache != nullptr);
  return out.transpose(1, 2).reshape({b, t, heads * head_dim});
}

std::string attention_path(torch::Device device, torch::ScalarType compute, bool gpulab_kernel) {
  if (gpulab_kernel && fused_causal_attention_applies(torch::empty({0}, device).to(compute)))
    return "gpulab's fused CPU kernel (no heads x T x T scores kept)";
  if (batched_attention_serves(device, compute))
    return "gpulab's batched products and softmax passes (scaled_dot_product_attention past 16 MiB "
           "of probabilities a layer)";
  return "scaled_dot_product_attention";
}

}  // namespace gpulab::train
