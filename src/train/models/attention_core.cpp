// Causal attention after the projections: cache, grouped-query expansion, the product (see .h).
#include "train/models/attention_core.h"

#include <torch/version.h>

#include <cmath>
#include <limits>

#include "train/models/cpu_bf16_matmul.h"
#include "train/ops/causal_attention.h"

namespace gpulab::train {
namespace {

// q: B x H x T x D; k, v: B x H x S x D, where the last T of the S key positions are the
// queries' own. Causal: query i sees keys up to S - T + i.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t t = q.size(2), s = k.size(2);
#if TORCH_VERSION_MAJOR >= 2
  // The fused kernels (flash / memory-efficient on GPUs). Its is_causal aligns the mask to the
  // top left, which is right only without earlier positions; one new token sees everything.
  if (t == s || t == 1) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, t == s && t > 1);
  auto allowed = torch::ones({t, s}, q.options().dtype(torch::kBool)).tril(s - t);
  return at::scaled_dot_product_attention(q, k, v, allowed, 0.0, false);
#else
  auto scores = matrix_product(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  if (t > 1) {
    auto hidden = torch::ones({t, s}, q.options().dtype(torch::kBool)).triu(s - t + 1);
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
  }
  // Softmax in float32 under autocast, as Hugging Face's eager attention does.
  auto probs = torch::softmax(scores, -1, at_least_float(q.scalar_type())).to(v.scalar_type());
  return matrix_product(probs, v);
#endif
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
    if (ck.defined()) {
      k = torch::cat({ck, k.to(ck.scalar_type())}, 2);
      v = torch::cat({cv, v.to(cv.scalar_type())}, 2);
    }
    ck = k;
    cv = v;
  }
  if (kv_heads != heads) {
    // Grouped-query attention: key/value head j serves query heads j*rep .. (j+1)*rep - 1.
    const int64_t rep = heads / kv_heads, s = k.size(2);
    k = k.unsqueeze(2).expand({b, kv_heads, rep, s, head_dim}).reshape({b, heads, s, head_dim});
    v = v.unsqueeze(2).expand({b, kv_heads, rep, s, head_dim}).reshape({b, heads, s, head_dim});
  }
  auto out = attend(q, k.to(q.scalar_type()), v.to(q.scalar_type()));
  return out.transpose(1, 2).reshape({b, t, heads * head_dim});
}

bool has_fused_attention() {
  return TORCH_VERSION_MAJOR >= 2;
}

std::string attention_path(torch::Device device, torch::ScalarType compute, bool fused_allowed) {
  if (fused_allowed && fused_causal_attention_applies(torch::empty({0}, device).to(compute)))
    return "fused causal kernel (gpulab's CPU attention: no heads x T x T scores kept)";
  if (has_fused_attention()) return "scaled_dot_product_attention";
  return "masked softmax (this libtorch has no fused kernel)";
}

}  // namespace gpulab::train
