// Causal attention of a training step on the CPU as four batched products and gpulab's own
// softmax passes: libtorch's CPU flash kernel (scaled_dot_product_attention) spends most of its
// time outside its products at training lengths, in bfloat16 most of all. The products run on
// libtorch's bmm (oneDNN, bfloat16 arithmetic where the CPU has it) in blocks of query rows, each
// against the keys its rows may see; the masked softmax forward and its backward are one pass
// each over those rows.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// The process-wide choice (--attention: on unless sdpa was asked for); with --cpu_kernels off the
// kernel is off as well. Returns the choice before.
bool set_batched_attention(bool on);
bool batched_attention_enabled();

// Whether it is on and takes this device and element type (the trainer's header line; the shapes
// are batched_attention_applies's).
bool batched_attention_serves(torch::Device device, torch::ScalarType type);

// Whether batched_causal_attention serves q, k, v (B x H x T x D, keys and values already expanded
// to the query heads): a CPU, float32, bfloat16 or float64, T > 1, and the probabilities it keeps
// for the backward pass (B x H x T x T) within kBatchedAttentionBytes; longer sequences take sdpa,
// which keeps nothing T x T.
bool batched_attention_applies(const torch::Tensor& q, const torch::Tensor& k);

// The same attention from the projections (Llama's path in training): q B x T x heads*D, k and v
// B x T x kv_heads*D (grouped-query heads: key/value head g serves query heads g*rep .. g*rep +
// rep - 1), rotated by the rotary tables cos and sin (float32, T x D or B x 1 x T x D) in
// Hugging Face's layout, in float32 (float64 for float64) and rounded once, as transformers
// computes them under autocast. Applies where batched_attention_applies would to the expanded
// heads, with D even and q, k, v of one type.
bool grouped_attention_applies(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t heads, const torch::Tensor& cos,
                               const torch::Tensor& sin);

// 16 MiB: llama-125m's 4 x 12 heads x 256^2 in float32 is 12 MiB. The check counts the whole
// T x T; the row blocks keep less (5/8 of it at four blocks), so 12 layers at the cap keep at most
// 192 MiB more than sdpa.
inline constexpr int64_t kBatchedAttentionBytes = int64_t{16} << 20;

// softmax(q k^T / sqrt(D), causal) v: B x H x T x D, differentiable once in q, k and v. In
// bfloat16 the scores and probabilities are bfloat16 between the passes (the arithmetic of
// transformers' eager attention under autocast); each pass computes in float32 (float64 for
// float64).
torch::Tensor batched_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v);

// B x T x heads*D, differentiable once in q, k and v; the products see each key/value head once
// (no expanded copies), and its gradient sums its query heads' inside them.
torch::Tensor grouped_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, const torch::Tensor& cos,
                                       const torch::Tensor& sin, int64_t heads);

}  // namespace gpulab::train
