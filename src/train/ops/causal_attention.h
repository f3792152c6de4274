// Causal self-attention fused for the CPU (--attention gpulab; written for libtorch 1.x, which had
// no fused kernel): rotary embedding, grouped-query heads, mask and softmax per head, nothing
// T x T kept for backward. The default is at::scaled_dot_product_attention.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether fused_causal_attention serves these projections: CPU, float32 or float64 (bf16 autocast's
// projections take scaled_dot_product_attention: the kernel's bf16 path was on oneDNN's sgemm).
bool fused_causal_attention_applies(const torch::Tensor& q);

// q: B x T x (heads * D); k, v: B x T x (kv_heads * D), straight from the projections; cos, sin:
// T x D (float32, the rotary tables). Returns B x T x (heads * D), ready for the output projection:
// per head h, softmax(rot(q_h) rot(k_g)^T / sqrt(D), causal) v_g with g = h / (heads / kv_heads),
// the arithmetic of the unfused path (rotate, product, scale, mask, softmax, product) without its
// copies (head transposes, key/value repeats, the B x H x T x T scores and probabilities). The
// backward pass recomputes each head's probabilities. Differentiable once in q, k and v.
torch::Tensor fused_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& cos,
                                     const torch::Tensor& sin, int64_t heads, int64_t kv_heads);

}  // namespace gpulab::train
