// A tensor-parallel GPT-2 (Megatron-LM's scheme on GPT2LMHeadModel) built from a shard of the
// ordinary weights (tp_gpt2_state.h): per block, attention whose fused c_attn is column-parallel
// over the heads (a rank holds its heads' q, k and v columns and biases; the causal core runs
// per local head) and a row-parallel c_proj, and an MLP with a column-parallel c_fc (its bias
// split) and a row-parallel c_proj, each ending in one all-reduce before the row-parallel bias
// is added (once); replicated LayerNorms and learned position table; a vocabulary-parallel token
// embedding whose rows are the tied output layer's, and a cross-entropy that never gathers the
// logits. With sequence parallelism the LayerNorms and residuals hold 1/TP of the sequence (each
// rank adds the position rows of its own positions). Parameter names are the ordinary ones, so a
// rank's state dict is its shard.
#pragma once

#include <torch/torch.h>

#include "train/models/decoder_config.h"
#include "train/models/gpt2/gpt2.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_layers.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

class TpGpt2AttentionImpl : public torch::nn::Module {
 public:
  TpGpt2AttentionImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o);
  // x: B x T x hidden, replicated (B x T/tp x hidden under sequence parallelism, `sp`); `still`
  // covers the whole sequence. Returns the same shape as x.
  torch::Tensor forward(const torch::Tensor& x, const NoRotation& still, bool sp);
  Gpt2Linear c_attn{nullptr};  // hidden x 3 hidden/tp: this rank's q, k, v columns side by side
  Gpt2Linear c_proj{nullptr};  // hidden/tp x hidden, its bias whole
  bool fused = true;           // gpulab's fused CPU kernel where it applies, as Gpt2Attention

 private:
  TpGroup* group_;
  int64_t local_heads_;
};
TORCH_MODULE(TpGpt2Attention);

class TpGpt2MlpImpl : public torch::nn::Module {
 public:
  TpGpt2MlpImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o);
  torch::Tensor forward(const torch::Tensor& x, bool sp);
  Gpt2Linear c_fc{nullptr};    // hidden x ffn/tp, its bias split
  Gpt2Linear c_proj{nullptr};  // ffn/tp x hidden, its bias whole

 private:
  TpGroup* group_;
};
TORCH_MODULE(TpGpt2Mlp);

// Gpt2Block with its two sublayers split: two all-reduces forward, two backward.
class TpGpt2BlockImpl : public torch::nn::Module {
 public:
  TpGpt2BlockImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o);
  torch::Tensor forward(const torch::Tensor& x, const NoRotation& still, bool sp);
  Gpt2LayerNorm ln_1{nullptr}, ln_2{nullptr};
  TpGpt2Attention attn{nullptr};
  TpGpt2Mlp mlp{nullptr};
};
TORCH_MODULE(TpGpt2Block);

class TpGpt2ModelImpl : public torch::nn::Module {
 public:
  // Only `part`'s pieces are made (a pipeline stage's); the others are shapes on the meta device.
  TpGpt2ModelImpl(TpGroup& group, const DecoderConfig& c, const torch::TensorOptions& o,
                  const ModelPart& part = {});
  VocabParallelEmbedding wte{nullptr};
  Gpt2Embedding wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  Gpt2LayerNorm ln_f{nullptr};
};
TORCH_MODULE(TpGpt2Model);

class TpGpt2LMHeadModel : public TpCausalLm {
 public:
  // Every rank of `group` builds its part from its shard (gpt2_shard_state of the ordinary
  // weights, in their dtype): refuses a TP size the shape does not fit and a shard that does not.
  // An empty shard leaves the parameters (float) for the caller to fill. With a `part` (a
  // pipeline stage's pieces) the other stages' pieces stay shapes and take no weights.
  TpGpt2LMHeadModel(TpGroup& group, DecoderConfig c, const StateDict& shard,
                    const ModelPart& part = {});
  using CausalLm::forward;
  // Tokens B x T -> while training, this rank's logits B x T x (padded vocabulary / TP), columns
  // from vocab_start(); in eval mode the whole vocabulary's, gathered. No KV cache.
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) override;
  torch::Tensor embed(const torch::Tensor& tokens) override;
  torch::Tensor block(int64_t i, const torch::Tensor& h) override;
  torch::Tensor head(const torch::Tensor& h) override;
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

  TpGpt2Model transformer{nullptr};
  ColumnParallelLinear lm_head{nullptr};  // null when tied to transformer->wte

 private:
  // Block i on h (this rank's positions under sequence parallelism); `still` covers the sequence.
  torch::Tensor tp_block(int64_t i, const torch::Tensor& h, const NoRotation& still);
};

}  // namespace gpulab::train::parallel
