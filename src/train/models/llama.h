// A Llama-3-style decoder: token embedding, RMSNorm, rotary position embeddings, grouped-query
// causal attention, SwiGLU MLP, optional tied output. Parameter names are Hugging Face's
// (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight), so
// its safetensors files load in transformers and theirs load here without a mapping table.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "train/models/classifier.h"
#include "train/models/llama_config.h"

namespace gpulab::train {

// Keys and values of every layer for the positions seen so far, for generation.
struct KvCache {
  std::vector<torch::Tensor> keys, values;  // per layer: B x kv_heads x length x head_dim
  int64_t length = 0;
};

// A bias-free linear map's weight (out x in), created on the device the model is built on: the
// forward passes multiply by it through linear_product (train/models/cpu_bf16_matmul.h).
class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(int64_t in, int64_t out, const torch::TensorOptions& options);
  torch::Tensor weight;
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
  LlamaAttentionImpl(const LlamaConfig& c, const torch::TensorOptions& options);
  // x: B x T x hidden; cos, sin: T x head_dim. With a cache, appends this step's keys/values
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
  LlamaMlpImpl(const LlamaConfig& c, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  Projection gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

// One transformer block: pre-norm attention and pre-norm SwiGLU, each with a residual. The unit
// that activation checkpointing recomputes and that sharding wraps.
class LlamaBlockImpl : public torch::nn::Module {
 public:
  LlamaBlockImpl(const LlamaConfig& c, const torch::TensorOptions& options);
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
  LlamaModelImpl(const LlamaConfig& c, const torch::TensorOptions& options);
  TokenEmbedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};
TORCH_MODULE(LlamaModel);

// Tokens (B x T, int64) -> logits (B x T x vocab). A Classifier so the trainer, DDP and the
// weights code take it like any other model of the zoo.
class LlamaForCausalLM : public Classifier {
 public:
  // Built on `device`: a GPU run creates and initialises its weights there, not on the CPU.
  explicit LlamaForCausalLM(LlamaConfig c, torch::Device device = torch::kCPU);
  torch::Tensor forward(torch::Tensor tokens) override { return forward(tokens, nullptr); }
  // With a cache, tokens are the positions after cache->length; the cache grows by T.
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache);
  // Recompute each block in the backward pass instead of keeping its activations.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  bool activation_checkpointing() const { return checkpointing_; }
  // The CPU attention kernel (train/ops/causal_attention.h) where it applies, or always the
  // unfused path (masked softmax, or scaled_dot_product_attention on libtorch 2.x).
  void set_fused_attention(bool on);
  const LlamaConfig& config() const { return config_; }
  // Weights as Hugging Face initialises them: normal(0, 0.02) matrices, unit norm scales.
  void reset_parameters();

  LlamaModel model{nullptr};
  Projection lm_head{nullptr};  // null when tied to model->embed_tokens

 private:
  LlamaConfig config_;
  bool checkpointing_ = false;
};

using LlamaPtr = std::shared_ptr<LlamaForCausalLM>;

// cos and sin of the rotary angles for positions [start, start + length): length x head_dim,
// float32 (Hugging Face's "rotate half" layout: the angle table repeated twice).
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t head_dim, double theta, int64_t start,
                                                      int64_t length, torch::Device device);

// True when this libtorch has at::scaled_dot_product_attention (2.x); 1.13 takes the masked
// softmax path, or gpulab's fused kernel on the CPU (attention_path says which).
bool has_fused_attention();

// The attention a training step of this compute dtype runs on this device, in words (the
// trainer's header line).
std::string attention_path(torch::Device device, torch::ScalarType compute, bool fused_allowed);

}  // namespace gpulab::train
