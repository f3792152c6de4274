// A Llama-3-style decoder: token embedding, RMSNorm, rotary position embeddings, grouped-query
// causal attention, SwiGLU MLP, optional tied output. Parameter names are Hugging Face's
// (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight), so
// its safetensors files load in transformers and theirs load here without a mapping table.
// Qwen2 is this decoder with biases on the query, key and value projections (its traits'
// qkv_biases; Qwen2ForCausalLM names its tensors as LlamaForCausalLM does): the "qwen2" family
// builds this class, so the two share every module.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "train/models/causal_lm.h"

namespace gpulab::train {

// A linear map's weight (out x in) and optional bias, created on the device the model is built
// on: the forward passes multiply by it through linear_product (train/models/cpu_bf16_matmul.h).
class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(int64_t in, int64_t out, const torch::TensorOptions& options, bool bias = false);
  // x @ weight^T (+ bias, in the product's dtype: bf16 under autocast, as nn.Linear's).
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;  // bias undefined without one
};
TORCH_MODULE(Projection);

// The token embedding table (vocab x hidden), created on the model's device.
class TokenEmbeddingImpl : public torch::nn::Module {
 public:
  TokenEmbeddingImpl(int64_t vocab, int64_t dim, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& tokens);
  torch::Tensor weight;
};
TORCH_MODULE(TokenEmbedding);

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions& options = {});
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  LlamaAttentionImpl(const DecoderConfig& c, const torch::TensorOptions& options);
  // x: B x T x hidden; cos, sin: T x head_dim (or B x 1 x T x head_dim, positions per row).
  // With a cache, appends this step's keys/values
  // to layer `layer` and attends to all of them.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        KvCache* cache = nullptr, int64_t layer = 0);
  Projection q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  // false: the unfused path even where the fused CPU kernel applies (A/B timings, the planner's
  // plain-attention probes).
  bool fused = true;

 private:
  int64_t heads_, kv_heads_, head_dim_;
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  LlamaMlpImpl(const DecoderConfig& c, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  Projection gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

// One transformer block: pre-norm attention and pre-norm SwiGLU, each with a residual. The unit
// that activation checkpointing recomputes and that sharding wraps.
class LlamaBlockImpl : public torch::nn::Module {
 public:
  LlamaBlockImpl(const DecoderConfig& c, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        KvCache* cache = nullptr, int64_t layer = 0);
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  LlamaMlp mlp{nullptr};
};
TORCH_MODULE(LlamaBlock);

// The decoder stack without the output head (HF's LlamaModel, registered as "model").
class LlamaModelImpl : public torch::nn::Module {
 public:
  // The pieces `part` leaves out are made on the meta device.
  LlamaModelImpl(const DecoderConfig& c, const torch::TensorOptions& options,
                 const ModelPart& part = {});
  TokenEmbedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};
TORCH_MODULE(LlamaModel);

// Tokens (B x T, int64) -> logits (B x T x vocab): the "llama" and "qwen2" families of
// build_causal_lm.
class LlamaForCausalLM : public CausalLm {
 public:
  // Built on `device`: a GPU run creates and initialises its weights there, not on the CPU.
  // Only `part`'s pieces on `device` (a pipeline stage's); the others on the meta device.
  explicit LlamaForCausalLM(DecoderConfig c, torch::Device device = torch::kCPU,
                            const ModelPart& part = {});
  using CausalLm::forward;
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) override;
  torch::Tensor embed(const torch::Tensor& tokens) override;
  torch::Tensor block(int64_t i, const torch::Tensor& h) override;
  torch::Tensor head(const torch::Tensor& h) override;
  void set_fused_attention(bool on) override;
  // Weights as Hugging Face initialises them: normal(0, 0.02) matrices, unit norm scales, zero
  // biases.
  void init_parameter(const std::string& name, torch::Tensor& p) const override;

  LlamaModel model{nullptr};
  Projection lm_head{nullptr};  // null when tied to model->embed_tokens

 private:
  // Block i on h (recomputed under activation checkpointing), with the rotary tables of h's
  // positions.
  torch::Tensor run_layer(int64_t i, const torch::Tensor& h, const torch::Tensor& cos,
                          const torch::Tensor& sin, KvCache* cache);
};

// Attention after the projections, shared by the whole and the tensor-parallel Llama (which
// passes its local heads): q B x T x (heads * D), k and v B x T x (kv_heads * D) -> B x T x
// (heads * D). Without a cache: gpulab's fused CPU kernel where `fused` and it applies, else the
// batched attention from the projections where it applies (batched_attention.h); otherwise rotary
// positions per head, then the causal core (train/models/attention_core.h).
torch::Tensor rotary_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& cos,
                                      const torch::Tensor& sin, int64_t heads, int64_t kv_heads,
                                      bool fused, KvCache* cache = nullptr, int64_t layer = 0);

// cos and sin of the rotary angles for `positions` (int64, any shape, on the tables' device):
// positions' shape x head_dim, float32 (Hugging Face's "rotate half" layout: the angle table
// repeated twice).
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t head_dim, double theta,
                                                      const torch::Tensor& positions);
// The same for positions [start, start + length): length x head_dim.
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t head_dim, double theta, int64_t start,
                                                      int64_t length, torch::Device device);

}  // namespace gpulab::train
