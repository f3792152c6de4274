// The causal attention every decoder family shares once q, k and v are made: the KV cache's
// append, grouped-query expansion, and the product itself (scaled_dot_product_attention, or on
// the CPU gpulab's batched attention for whole sequences), plus what the trainer's header says.
#pragma once

#include <torch/torch.h>

#include <string>

#include "train/models/causal_lm.h"

namespace gpulab::train {

// Half and bfloat16 compute their softmax and norms in float32 (as transformers does); float64,
// the numerics check, stays float64 so that no float32 rounding depends on the batch split.
torch::ScalarType at_least_float(torch::ScalarType t);

// q: B x H x T x D; k, v: B x KV x T x D for this step's positions. With a cache, appends k and
// v to layer `layer` and attends over all positions so far, through the cache's padding mask
// where it has one (KvCache::attend). Returns B x T x (H * D).
torch::Tensor causal_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v,
                               KvCache* cache, int64_t layer);

// The attention a training step of this compute dtype runs on this device, in words (the
// trainer's header line): at::scaled_dot_product_attention, gpulab's rotary CPU kernel where asked
// for (--attention gpulab) and it applies, or gpulab's batched CPU attention (--attention auto).
std::string attention_path(torch::Device device, torch::ScalarType compute, bool gpulab_kernel);

}  // namespace gpulab::train
