// Attention of one new token per row against the KV cache, in float32 on the CPU, outside
// autograd: a decode step's attention. libtorch's CPU flash kernel spent about 240 us a call on a
// 32-row decode step of a 4-layer model (16 % of the generation: its blocking and buffers are made
// for long queries); one query a row needs a dot product per cached position, a softmax and a
// weighted sum of the values. Grouped-query heads read their key/value head in place (no
// expanded copy).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether decode_attention takes it: float32 CPU tensors, q [B, H, 1, D], k and v [B, KVH, S, D]
// with unit stride in D and KVH dividing H, mask undefined or bool [B, 1, 1, S], no gradient
// wanted, AVX2 + FMA, gpulab's CPU kernels on.
bool decode_attention_applies(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& mask);

// softmax(q k^T / sqrt(D) where the mask allows) v, shaped [B, 1, H * D] (heads side by side, as
// the output projection takes them). A row whose mask allows no position gets zeros.
torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask);

}  // namespace gpulab::train
