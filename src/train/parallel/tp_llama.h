// A tensor-parallel Llama (Megatron-LM's scheme) built from a shard of the ordinary weights
// (tp_llama_state.h): a vocabulary-parallel embedding; per block, attention with its query and
// key/value heads split over the ranks (or, with fewer kv heads than ranks, each rank keeping
// the kv head its query heads use) (column-parallel q/k/v sharing one input copy, rotary
// positions and the causal core per local head, a row-parallel output) and a SwiGLU MLP
// (column-parallel gate/up, row-parallel down), each ending in one all-reduce; replicated
// RMSNorms; a vocabulary-parallel output layer and cross-entropy that never gather the logits.
// With sequence parallelism the norms and residuals hold 1/TP of the sequence: each sublayer
// gathers the sequence on the way in and reduce-scatters it on the way out instead of copying
// in and all-reducing out. Parameter names are the ordinary ones, so a rank's state dict is its
// shard.
#pragma once

#include <torch/torch.h>

#include "train/models/decoder_config.h"
#include "train/models/llama/llama.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_layers.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

class TpLlamaAttentionImpl : public torch::nn::Module {
 public:
  // `o`: where the weights are made (the meta device for another pipeline stage's block).
  TpLlamaAttentionImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o = {});
  // x: B x T x hidden, replicated (B x T/tp x hidden under sequence parallelism, `sp`);
  // cos, sin: T x head_dim. Returns the same shape as x.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        bool sp = false);
  ColumnParallelLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr};
  RowParallelLinear o_proj{nullptr};
  bool fused = true;  // gpulab's fused CPU kernel where it applies, as LlamaAttention

 private:
  TpGroup* group_;
  int64_t local_heads_, local_kv_heads_;
};
TORCH_MODULE(TpLlamaAttention);

class TpLlamaMlpImpl : public torch::nn::Module {
 public:
  TpLlamaMlpImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o = {});
  torch::Tensor forward(const torch::Tensor& x, bool sp = false);
  ColumnParallelLinear gate_proj{nullptr}, up_proj{nullptr};
  RowParallelLinear down_proj{nullptr};

 private:
  TpGroup* group_;
};
TORCH_MODULE(TpLlamaMlp);

// LlamaBlock with the two sublayers split: two all-reduces forward, two backward.
class TpLlamaBlockImpl : public torch::nn::Module {
 public:
  TpLlamaBlockImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o = {});
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        bool sp = false);
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  TpLlamaAttention self_attn{nullptr};
  TpLlamaMlp mlp{nullptr};
};
TORCH_MODULE(TpLlamaBlock);

class TpLlamaModelImpl : public torch::nn::Module {
 public:
  TpLlamaModelImpl(TpGroup& group, const DecoderConfig& c, const ModelPart& part = {});
  VocabParallelEmbedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};
TORCH_MODULE(TpLlamaModel);

class TpLlamaForCausalLM : public TpCausalLm {
 public:
  // Every rank of `group` builds its part from its shard (shard_state of the ordinary weights):
  // refuses a TP size the shape does not fit (check_tp_layout) and a shard that does not fit.
  // Only `part`'s pieces are made (a pipeline stage's, each split over the group; the shard then
  // holds those alone); the rest are shapes on the meta device, as build_causal_lm makes them.
  // An empty shard leaves the parameters (float) for the caller to fill.
  TpLlamaForCausalLM(TpGroup& group, DecoderConfig c, const StateDict& shard,
                     const ModelPart& part = {});
  using CausalLm::forward;
  // Tokens B x T -> while training, this rank's logits B x T x (padded vocabulary / TP), columns
  // from vocab_start(); in eval mode the whole vocabulary's, gathered (evaluation's top-k).
  // No KV cache (generation runs the ordinary model).
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) override;
  // The pieces of forward (causal_lm.h), on this rank's part of each layer.
  torch::Tensor embed(const torch::Tensor& tokens) override;
  torch::Tensor block(int64_t i, const torch::Tensor& h) override;
  torch::Tensor head(const torch::Tensor& h) override;
  // The mean cross-entropy over the targets that are not kIgnoreIndex, the same on every rank.
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets);
  std::pair<torch::Tensor, torch::Tensor> loss_of(const torch::Tensor& logits,
                                                  const torch::Tensor& targets) override;
  int64_t vocab_start() const;
  void set_fused_attention(bool on) override;
  void reset_parameters() override;  // refused: the weights come from the shard
  using TpCausalLm::clip_grad_norm;
  using TpCausalLm::finish_gradients;
  void finish_gradients(const std::vector<NamedGrad>& grads) override;
  double clip_grad_norm(const std::vector<NamedGrad>& grads, double max_norm,
                        dist::Communicator* disjoint) override;
  StateDict shard(const StateDict& full) const override;
  StateDict gather(const StateDict& mine) override;
  TpSlices slices_of(const std::string& name, c10::IntArrayRef whole) const override;

  TpLlamaModel model{nullptr};
  ColumnParallelLinear lm_head{nullptr};  // null when tied to model->embed_tokens

 private:
  torch::Tensor tp_block(int64_t i, const torch::Tensor& h, const torch::Tensor& cos,
                         const torch::Tensor& sin);
  torch::Tensor mean_loss(const torch::Tensor& logits, const torch::Tensor& targets);
};

}  // namespace gpulab::train::parallel
