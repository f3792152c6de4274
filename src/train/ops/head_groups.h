// The grouped-query layout of gpulab's batched attention: q, k and v as the projections give them
// (B x T x heads*D) to one dense G x T*rep x D block per key/value head and back, the rotary
// embedding folded into the same pass, so that the attention's products see each key/value head
// once and no tensor is expanded to the query heads.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Whether cos and sin are rotary tables for b sequences of t positions of d elements: float32,
// t x d, or b x 1 x t x d (positions per sequence; 1 x 1 x t x d too).
bool rotary_tables_fit(const torch::Tensor& cos, const torch::Tensor& sin, int64_t b, int64_t t,
                       int64_t d);

// x: B x T x groups*rep*d (rep query heads a group) to (B*groups) x (T*rep) x d, dense: row
// t*rep + r of group (b, g) is head g*rep + r of position t, as Hugging Face's repeat_kv pairs
// them. With cos and sin (rotary_tables_fit), each row rotated in Hugging Face's layout in float32
// (float64 for float64) and rounded once to x's type, as transformers' apply_rotary_pos_emb does
// under autocast.
torch::Tensor to_head_groups(const torch::Tensor& x, int64_t groups, int64_t d,
                             const torch::Tensor& cos = {}, const torch::Tensor& sin = {});

// The inverse: (b*groups) x (t*rep) x d to b x t x groups*rep*d; with cos and sin, each row
// through the rotation's transpose (the gradient of the rows before rotation).
torch::Tensor from_head_groups(const torch::Tensor& x, int64_t b, int64_t t,
                               const torch::Tensor& cos = {}, const torch::Tensor& sin = {});

}  // namespace gpulab::train
