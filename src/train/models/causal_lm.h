// The base of every decoder-only language model: tokens (B x T) to logits (B x T x vocab), with a
// KV cache for generation and switches for activation checkpointing and the attention path. The
// trainer, generation, the planner and the sharding use only this and build_causal_lm
// (train/models/lm_families.h): a family (train/models/<family>/) is a subclass plus a row there.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/models/classifier.h"
#include "train/models/decoder_config.h"
#include "train/models/kv_cache.h"

namespace gpulab::train {

// Which pieces of a model are made on its device; the rest are made on the meta device (shapes
// only, no memory). A pipeline stage builds only its own (train/parallel/pipeline_stage.h).
struct ModelPart {
  std::vector<bool> blocks;  // per block; empty: every block
  bool embedding = true;     // the input embeddings
  bool head = true;          // the final norm and the output layer (tied: the token embedding)
  bool has_block(int64_t i) const { return blocks.empty() || blocks[static_cast<size_t>(i)]; }
  // The token embedding's weight is needed by the input and, when tied, by the output layer.
  bool has_token_embedding(bool tied) const { return embedding || (head && tied); }
};

// A Classifier so that the trainer, DDP and the weights code take it like any model of the zoo.
class CausalLm : public Classifier {
 public:
  torch::Tensor forward(torch::Tensor tokens) override { return forward(tokens, nullptr); }
  // With a cache, tokens are the positions after cache->length; the cache grows by T. A cache
  // with padding (KvCache::present) gives each row its own positions and mask.
  virtual torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) = 0;
  // gpulab's CPU attention kernel (train/ops/causal_attention.h) where it applies, or always
  // at::scaled_dot_product_attention (the default).
  virtual void set_fused_attention(bool on) = 0;
  // Weights as the family's reference implementation initialises them: init_parameter on each
  // parameter in named_parameters() order, the order its random numbers are drawn in.
  virtual void reset_parameters();
  // Fills p, the parameter `name` or a tensor of its shape on the model's device, as
  // reset_parameters does (drawing from p's device's generator): a tensor-parallel rank draws
  // the whole model's values one tensor at a time and keeps its shard of each. kUnsupported for
  // a model without it.
  virtual void init_parameter(const std::string& name, torch::Tensor& p) const;
  // Recompute each block in the backward pass instead of keeping its activations.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  bool activation_checkpointing() const { return checkpointing_; }
  const DecoderConfig& config() const { return config_; }

  // The pieces pipeline parallelism runs on different ranks, for whole sequences from position 0
  // without a cache: forward(tokens) is head(block(L-1, ... block(0, embed(tokens)))), the same
  // operations in the same order. block() recomputes under activation checkpointing as forward's
  // blocks do.
  virtual torch::Tensor embed(const torch::Tensor& tokens) = 0;  // B x T -> B x T x hidden
  virtual torch::Tensor block(int64_t i, const torch::Tensor& h) = 0;
  virtual torch::Tensor head(const torch::Tensor& h) = 0;  // final norm, output layer: logits

 protected:
  explicit CausalLm(DecoderConfig c);  // validates the shape
  // Refuses a sequence past the shape's positions; sizes an empty cache and sets its mask for
  // this pass. Returns the positions of `tokens`: [T] for every row alike, or [B, T] for a
  // cache with padding (kv_cache.h).
  torch::Tensor begin_forward(const torch::Tensor& tokens, KvCache* cache) const;
  // The hidden states the output head needs: the last position's alone where the cache asks.
  static torch::Tensor head_input(const torch::Tensor& h, const KvCache* cache);
  // Fills p from normal(0, std) as reset_parameters does. A piece on the meta device (another
  // pipeline stage's) draws as many values into a scratch tensor on the model's device instead,
  // so the generator moves on exactly as for the whole model and a model built in part holds
  // the whole model's values for the same seed.
  void init_normal(torch::Tensor& p, double std) const;
  // Runs one block on h: recomputed in the backward pass when checkpointing applies (training
  // with gradients), else through run_unit (sharded data parallel gathers the block around it).
  torch::Tensor run_block(const std::shared_ptr<torch::nn::Module>& block, const torch::Tensor& h,
                          std::function<torch::Tensor(const torch::Tensor&)> fn) const;

  DecoderConfig config_;

 private:
  bool checkpointing_ = false;
};

using CausalLmPtr = std::shared_ptr<CausalLm>;

}  // namespace gpulab::train
