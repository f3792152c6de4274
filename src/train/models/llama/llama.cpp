// The Llama decoder's modules and forward pass (training, evaluation and KV-cached generation).
#include "train/models/llama/llama.h"

#include "core/error.h"
#include "train/models/attention_core.h"
#include "train/models/cpu_bf16_matmul.h"
#include "train/ops/batched_attention.h"
#include "train/ops/causal_attention.h"
#include "train/ops/rms_norm.h"
#include "train/ops/swiglu.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

// Hugging Face's rotary layout: the two halves of the head dimension rotate as a pair.
torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos,
                           const torch::Tensor& sin) {
  return x * cos.to(x.scalar_type()) + rotate_half(x) * sin.to(x.scalar_type());
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t head_dim, double theta,
                                                      const torch::Tensor& positions) {
  // inv_freq in float32 as transformers computes it: 1 / theta^(2i / d).
  auto exponents =
      torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kLong)).to(torch::kFloat) /
      static_cast<double>(head_dim);
  auto inv_freq = (1.0 / torch::pow(theta, exponents)).to(positions.device());
  // The product torch::outer forms, for any shape of positions.
  auto angles = positions.to(torch::kFloat).unsqueeze(-1) * inv_freq;
  auto table = torch::cat({angles, angles}, -1);
  return {table.cos(), table.sin()};
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t head_dim, double theta, int64_t start,
                                                      int64_t length, torch::Device device) {
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  return rotary_tables(head_dim, theta, torch::arange(start, start + length, longs));
}

ProjectionImpl::ProjectionImpl(int64_t in, int64_t out, const torch::TensorOptions& options,
                               bool with_bias) {
  weight = register_parameter("weight", torch::empty({out, in}, options));
  if (with_bias) bias = register_parameter("bias", torch::zeros({out}, options));
}

torch::Tensor ProjectionImpl::forward(const torch::Tensor& x) {
  auto y = linear_product(x, weight);
  return bias.defined() ? y + bias.to(y.scalar_type()) : y;
}

TokenEmbeddingImpl::TokenEmbeddingImpl(int64_t vocab, int64_t dim,
                                       const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({vocab, dim}, options));
}

torch::Tensor TokenEmbeddingImpl::forward(const torch::Tensor& tokens) {
  return torch::embedding(weight, tokens);
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, const torch::TensorOptions& options) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}, options));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  // Under CPU bf16 autocast the norm feeds only linear layers, which would each cast its output
  // to bf16: the fused kernel rounds it once.
  const auto result =
      active_autocast(x.device()) == Precision::kBf16 ? torch::kBFloat16 : torch::kFloat;
  if (fused_rms_norm_applies(x, weight, result)) return rms_norm(x, weight, eps_, result);
  // Normalised in float32 (or float64) whatever the input, then back to the input's dtype.
  auto xf = x.to(at_least_float(x.scalar_type()));
  auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps_);
  return weight * y.to(x.scalar_type());
}

LlamaAttentionImpl::LlamaAttentionImpl(const DecoderConfig& c, const torch::TensorOptions& o)
    : heads_(c.num_heads), kv_heads_(c.num_kv_heads), head_dim_(c.dim_per_head()) {
  const bool bias = c.traits().qkv_biases;
  q_proj = register_module("q_proj", Projection(c.hidden_size, heads_ * head_dim_, o, bias));
  k_proj = register_module("k_proj", Projection(c.hidden_size, kv_heads_ * head_dim_, o, bias));
  v_proj = register_module("v_proj", Projection(c.hidden_size, kv_heads_ * head_dim_, o, bias));
  o_proj = register_module("o_proj", Projection(heads_ * head_dim_, c.hidden_size, o));
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                          const torch::Tensor& sin, KvCache* cache, int64_t layer) {
  // Projection's forward adds the q/k/v biases of a family that has them (Qwen2).
  auto q = q_proj(x);
  auto k = k_proj(x);
  auto v = v_proj(x);
  return linear_product(
      rotary_causal_attention(q, k, v, cos, sin, heads_, kv_heads_, fused, cache, layer),
      o_proj->weight);
}

torch::Tensor rotary_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& cos,
                                      const torch::Tensor& sin, int64_t heads, int64_t kv_heads,
                                      bool fused, KvCache* cache, int64_t layer) {
  if (cache == nullptr) {
    if (fused && fused_causal_attention_applies(q))
      return fused_causal_attention(q, k, v, cos, sin, heads, kv_heads);
    if (grouped_attention_applies(q, k, v, heads, cos, sin))
      return grouped_causal_attention(q, k, v, cos, sin, heads);
  }
  const int64_t b = q.size(0), t = q.size(1), head_dim = q.size(2) / heads;
  auto qh = apply_rotary(q.view({b, t, heads, head_dim}).transpose(1, 2), cos, sin);
  auto kh = apply_rotary(k.view({b, t, kv_heads, head_dim}).transpose(1, 2), cos, sin);
  auto vh = v.view({b, t, kv_heads, head_dim}).transpose(1, 2);
  return causal_attention(qh, kh, vh, cache, layer);
}

LlamaMlpImpl::LlamaMlpImpl(const DecoderConfig& c, const torch::TensorOptions& o) {
  gate_proj = register_module("gate_proj", Projection(c.hidden_size, c.intermediate_size, o));
  up_proj = register_module("up_proj", Projection(c.hidden_size, c.intermediate_size, o));
  down_proj = register_module("down_proj", Projection(c.intermediate_size, c.hidden_size, o));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  return linear_product(
      swiglu(linear_product(x, gate_proj->weight), linear_product(x, up_proj->weight)),
      down_proj->weight);
}

LlamaBlockImpl::LlamaBlockImpl(const DecoderConfig& c, const torch::TensorOptions& o) {
  self_attn = register_module("self_attn", LlamaAttention(c, o));
  mlp = register_module("mlp", LlamaMlp(c, o));
  input_layernorm = register_module("input_layernorm", RmsNorm(c.hidden_size, c.norm_eps, o));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.norm_eps, o));
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                      const torch::Tensor& sin, KvCache* cache, int64_t layer) {
  auto h = x + self_attn(input_layernorm(x), cos, sin, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

LlamaModelImpl::LlamaModelImpl(const DecoderConfig& c, const torch::TensorOptions& o,
                               const ModelPart& part) {
  const auto on = [&](bool here) { return here ? o : o.device(torch::kMeta); };
  embed_tokens = register_module(
      "embed_tokens", TokenEmbedding(c.vocab_size, c.hidden_size,
                                     on(part.has_token_embedding(c.tie_word_embeddings))));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i)
    layers->push_back(LlamaBlock(c, on(part.has_block(i))));
  norm = register_module("norm", RmsNorm(c.hidden_size, c.norm_eps, on(part.head)));
}

// Parameters are created uninitialised on the device and filled there once (reset_parameters):
// a 1B model on a GPU skips 5 GB of CPU allocation, a CPU initialisation and the copy.
LlamaForCausalLM::LlamaForCausalLM(DecoderConfig c, torch::Device device, const ModelPart& part)
    : CausalLm(std::move(c)) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat).device(device);
  model = register_module("model", LlamaModel(config_, o, part));
  if (!config_.tie_word_embeddings)
    lm_head = register_module("lm_head", Projection(config_.hidden_size, config_.vocab_size,
                                                    part.head ? o : o.device(torch::kMeta)));
  reset_parameters();
}

void LlamaForCausalLM::set_fused_attention(bool on) {
  for (auto& layer : *model->layers) layer->as<LlamaBlockImpl>()->self_attn->fused = on;
}

void LlamaForCausalLM::init_parameter(const std::string& name, torch::Tensor& p) const {
  const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  if (p.dim() >= 2)
    init_normal(p, 0.02);
  else
    p.fill_(is_bias ? 0.0 : 1.0);  // Qwen2's q/k/v biases; RMSNorm scales
}

torch::Tensor LlamaForCausalLM::forward(const torch::Tensor& tokens, KvCache* cache) {
  const auto positions = begin_forward(tokens, cache);
  const int64_t t = tokens.size(1);
  auto h = model->embed_tokens(tokens);
  auto [cos, sin] = rotary_tables(config_.dim_per_head(), config_.rope_theta, positions);
  if (positions.dim() == 2) {  // per row: B x 1 x T x head_dim, broadcast over the heads
    cos = cos.unsqueeze(1);
    sin = sin.unsqueeze(1);
  }
  for (int64_t i = 0; i < config_.num_layers; ++i) h = run_layer(i, h, cos, sin, cache);
  h = head(head_input(h, cache));
  if (cache) cache->length += t;
  return h;
}

torch::Tensor LlamaForCausalLM::run_layer(int64_t i, const torch::Tensor& h,
                                          const torch::Tensor& cos, const torch::Tensor& sin,
                                          KvCache* cache) {
  std::shared_ptr<torch::nn::Module> block = model->layers[static_cast<size_t>(i)];
  auto* blk = block->as<LlamaBlockImpl>();
  return run_block(block, h, [blk, cos, sin, cache, i](const torch::Tensor& x) {
    return blk->forward(x, cos, sin, cache, i);
  });
}

torch::Tensor LlamaForCausalLM::embed(const torch::Tensor& tokens) {
  return model->embed_tokens(tokens);
}

torch::Tensor LlamaForCausalLM::block(int64_t i, const torch::Tensor& h) {
  const auto [cos, sin] =
      rotary_tables(config_.dim_per_head(), config_.rope_theta, 0, h.size(1), h.device());
  return run_layer(i, h, cos, sin, nullptr);
}

torch::Tensor LlamaForCausalLM::head(const torch::Tensor& h) {
  return linear_product(model->norm(h), lm_head ? lm_head->weight : model->embed_tokens->weight);
}

}  // namespace gpulab::train
