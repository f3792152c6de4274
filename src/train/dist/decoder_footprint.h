// The memory footprint of a decoder (any family of causal_lm.h) from its shape alone, so that
// `gpulab plan` can answer for llama3-70b on a machine that could never hold it: the flat groups
// exactly as the wrap policy cuts the real model (one unit per block, the embeddings, final norm
// and output projection at the root), and activations per sample from a linear fit over small probe
// models that run this repository's own forward pass under the planner's counter.
#pragma once

#include <cstdint>

#include "train/dist/memory_plan.h"
#include "train/models/decoder_config.h"

namespace gpulab::train::dist {

// The footprint of `c` training on sequences of `seq_len` tokens, its parameters and activations
// `element_bytes` wide (4: fp32, as the fit was measured; 8: fp64 doubles everything).
// fused_attention: gpulab's CPU kernel (--attention gpulab) instead of
// scaled_dot_product_attention; neither keeps heads x T x T scores. (gpulab's batched CPU
// attention of --attention auto does, up to 16 MiB a layer: not in the plan.)
ModelFootprint decoder_footprint(const DecoderConfig& c, int64_t seq_len, bool fused_attention,
                                 int64_t element_bytes = 4);

// The same measured on the real model (built and run once; for small shapes and tests).
ModelFootprint measured_decoder_footprint(const DecoderConfig& c, int64_t seq_len,
                                          bool fused_attention);

// What a generation rank (GRPO's, apart from the training ranks) holds for one step's rollouts:
// the weights, the KV cache of `rows` rows (prompts x group size: a prompt's prefix is repeated
// for its group, kv_cache.h) of `length` positions, keys and values of every layer, and the
// logits of one position per row (the output head runs on the last position alone).
struct GenerationMemory {
  int64_t weights = 0;
  int64_t kv_cache = 0;
  int64_t logits = 0;
  int64_t total() const { return weights + kv_cache + logits; }
};
GenerationMemory generation_memory(const DecoderConfig& c, int64_t rows, int64_t length,
                                   int64_t weight_bytes, int64_t activation_bytes);

}  // namespace gpulab::train::dist
