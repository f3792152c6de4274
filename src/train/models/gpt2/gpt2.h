// A GPT-2-style decoder: token and learned position embeddings, pre-LayerNorm blocks of causal
// attention and a GELU (tanh) MLP, linear layers with biases, the output head tied to the token
// embedding. Parameter names and layouts are Hugging Face's GPT2LMHeadModel's
// (transformer.h.N.attn.c_attn.weight is in x out, as its Conv1D keeps it), so the weights move
// between gpulab and transformers without a mapping table.
#pragma once

#include <torch/torch.h>

#include "train/models/causal_lm.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {

// The identity rotation tables the fused attention kernel takes (undefined: not used).
struct NoRotation {
  torch::Tensor cos, sin;
};
// The identity rotation for t positions of head_dim (cos 1, sin 0, float32).
NoRotation still_rotation(int64_t t, int64_t head_dim, torch::Device device);

// Causal attention of q, k, v (B x T x heads * head_dim, the heads side by side, as c_attn's
// thirds hold them) to B x T x heads * head_dim, before c_proj: gpulab's fused CPU kernel where
// `fused` and it applies (`still` defined, no cache), else the attention core (with the cache).
// The heads are independent, so a tensor-parallel rank runs it on its own heads.
torch::Tensor gpt2_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             int64_t heads, const NoRotation& still, bool fused,
                             KvCache* cache = nullptr, int64_t layer = 0);

// y = x @ weight + bias with weight in x out (transformers' Conv1D).
class Gpt2LinearImpl : public torch::nn::Module {
 public:
  Gpt2LinearImpl(int64_t in, int64_t out, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
};
TORCH_MODULE(Gpt2Linear);

// LayerNorm over the last dimension, with its scale and bias.
class Gpt2LayerNormImpl : public torch::nn::Module {
 public:
  Gpt2LayerNormImpl(int64_t dim, double eps, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;

 private:
  double eps_;
};
TORCH_MODULE(Gpt2LayerNorm);

// A lookup table (vocab x dim or positions x dim).
class Gpt2EmbeddingImpl : public torch::nn::Module {
 public:
  Gpt2EmbeddingImpl(int64_t rows, int64_t dim, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& index);
  torch::Tensor weight;
};
TORCH_MODULE(Gpt2Embedding);

class Gpt2AttentionImpl : public torch::nn::Module {
 public:
  Gpt2AttentionImpl(const DecoderConfig& c, const torch::TensorOptions& options);
  // `still` (cos 1 and sin 0, T x head_dim, made once per forward pass) lets gpulab's fused CPU
  // kernel, which rotates q and k, run without rotating; undefined with a cache.
  torch::Tensor forward(const torch::Tensor& x, const NoRotation& still, KvCache* cache,
                        int64_t layer);
  Gpt2Linear c_attn{nullptr}, c_proj{nullptr};
  bool fused = true;  // gpulab's CPU kernel where it applies

 private:
  int64_t heads_;
};
TORCH_MODULE(Gpt2Attention);

class Gpt2MlpImpl : public torch::nn::Module {
 public:
  Gpt2MlpImpl(const DecoderConfig& c, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  Gpt2Linear c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Gpt2Mlp);

// One block, the unit activation checkpointing recomputes and sharding wraps.
class Gpt2BlockImpl : public torch::nn::Module {
 public:
  Gpt2BlockImpl(const DecoderConfig& c, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const NoRotation& still, KvCache* cache = nullptr,
                        int64_t layer = 0);
  Gpt2LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Gpt2Attention attn{nullptr};
  Gpt2Mlp mlp{nullptr};
};
TORCH_MODULE(Gpt2Block);

// The stack without the head (transformers' GPT2Model, registered as "transformer").
class Gpt2ModelImpl : public torch::nn::Module {
 public:
  // The pieces `part` leaves out are made on the meta device.
  Gpt2ModelImpl(const DecoderConfig& c, const torch::TensorOptions& options,
                const ModelPart& part = {});
  Gpt2Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  Gpt2LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Gpt2Model);

// The "gpt2" family of build_causal_lm.
class Gpt2LMHeadModel : public CausalLm {
 public:
  // Only `part`'s pieces on `device` (a pipeline stage's); the others on the meta device.
  explicit Gpt2LMHeadModel(DecoderConfig c, torch::Device device = torch::kCPU,
                           const ModelPart& part = {});
  using CausalLm::forward;
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) override;
  torch::Tensor embed(const torch::Tensor& tokens) override;
  torch::Tensor block(int64_t i, const torch::Tensor& h) override;
  torch::Tensor head(const torch::Tensor& h) override;
  void set_fused_attention(bool on) override;
  // As transformers initialises GPT-2: normal(0, 0.02) matrices and embeddings, the residual
  // projections (c_proj) scaled by 1 / sqrt(2 x layers), zero biases, unit LayerNorm scales.
  void init_parameter(const std::string& name, torch::Tensor& p) const override;

  Gpt2Model transformer{nullptr};
  // vocab x dim like wte (logits = h @ weight^T); null when tied to transformer->wte.
  Gpt2Embedding lm_head{nullptr};

 private:
  // Block i on h (recomputed under activation checkpointing).
  torch::Tensor run_layer(int64_t i, const torch::Tensor& h, const NoRotation& still,
                          KvCache* cache);
};

// A GPT-2 file of the Hugging Face hub (OpenAI's weights as transformers' GPT2Model names them)
// under Gpt2LMHeadModel's names: the stack's tensors gain "transformer.", and each block's
// causal-mask buffers (attn.bias, attn.masked_bias), which gpulab's attention does not keep,
// are dropped. A file already under GPT2LMHeadModel's names passes through (its mask buffers,
// as transformers 4 wrote them, dropped too).
StateDict gpt2_from_hub_names(StateDict weights);

}  // namespace gpulab::train
