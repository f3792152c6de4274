// The GPT-2 decoder's modules and forward pass (training, evaluation and KV-cached generation).
#include "train/models/gpt2/gpt2.h"

#include <cmath>
#include <string_view>

#include "train/models/attention_core.h"
#include "train/models/cpu_bf16_matmul.h"
#include "train/ops/causal_attention.h"
#include "train/ops/onednn_linear.h"
#include "train/ops/packed_linear.h"

namespace gpulab::train {

StateDict gpt2_from_hub_names(StateDict weights) {
  const auto is_mask = [](const std::string& name) {
    for (std::string_view end : {".attn.bias", ".attn.masked_bias"})
      if (name.size() > end.size() && name.ends_with(end)) return true;
    return false;
  };
  StateDict out;
  for (auto& [name, tensor] : weights) {
    if (is_mask(name)) continue;
    const bool stack = name.rfind("transformer.", 0) != 0 && name.rfind("lm_head.", 0) != 0;
    out.emplace(stack ? "transformer." + name : name, std::move(tensor));
  }
  return out;
}

Gpt2LinearImpl::Gpt2LinearImpl(int64_t in, int64_t out, const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({in, out}, options));
  bias = register_parameter("bias", torch::zeros({out}, options));
}

torch::Tensor Gpt2LinearImpl::forward(const torch::Tensor& x) {
  // A generation's step: the [in, out] weight packed as Llama's [out, in] ones are.
  if (auto y = packed_decode_product(x, weight, true); y.defined()) return y + bias;
  return dense_linear(x, weight.t(), bias);
}

Gpt2LayerNormImpl::Gpt2LayerNormImpl(int64_t dim, double eps, const torch::TensorOptions& options)
    : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}, options));
  bias = register_parameter("bias", torch::zeros({dim}, options));
}

torch::Tensor Gpt2LayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps_);
}

Gpt2EmbeddingImpl::Gpt2EmbeddingImpl(int64_t rows, int64_t dim,
                                     const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({rows, dim}, options));
}

torch::Tensor Gpt2EmbeddingImpl::forward(const torch::Tensor& index) {
  return torch::embedding(weight, index);
}

Gpt2AttentionImpl::Gpt2AttentionImpl(const DecoderConfig& c, const torch::TensorOptions& o)
    : heads_(c.num_heads) {
  const int64_t width = heads_ * c.dim_per_head();
  c_attn = register_module("c_attn", Gpt2Linear(c.hidden_size, 3 * width, o));
  c_proj = register_module("c_proj", Gpt2Linear(width, c.hidden_size, o));
}

torch::Tensor Gpt2AttentionImpl::forward(const torch::Tensor& x, const NoRotation& still,
                                         KvCache* cache, int64_t layer) {
  auto qkv = c_attn(x).chunk(3, -1);
  return c_proj(gpt2_attention(qkv[0], qkv[1], qkv[2], heads_, still, fused, cache, layer));
}

NoRotation still_rotation(int64_t t, int64_t head_dim, torch::Device device) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  return {torch::ones({t, head_dim}, f32), torch::zeros({t, head_dim}, f32)};
}

torch::Tensor gpt2_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             int64_t heads, const NoRotation& still, bool fused, KvCache* cache,
                             int64_t layer) {
  const int64_t b = q.size(0), t = q.size(1), head_dim = q.size(2) / heads;
  if (fused && cache == nullptr && still.cos.defined() && head_dim % 2 == 0 &&
      fused_causal_attention_applies(q))
    return fused_causal_attention(q, k, v, still.cos, still.sin, heads, heads);
  const auto split = [&](const torch::Tensor& p) {
    return p.reshape({b, t, heads, head_dim}).transpose(1, 2);
  };
  return causal_attention(split(q), split(k), split(v), cache, layer);
}

Gpt2MlpImpl::Gpt2MlpImpl(const DecoderConfig& c, const torch::TensorOptions& o) {
  c_fc = register_module("c_fc", Gpt2Linear(c.hidden_size, c.intermediate_size, o));
  c_proj = register_module("c_proj", Gpt2Linear(c.intermediate_size, c.hidden_size, o));
}

torch::Tensor Gpt2MlpImpl::forward(const torch::Tensor& x) {
  return c_proj(torch::gelu(c_fc(x), "tanh"));
}

Gpt2BlockImpl::Gpt2BlockImpl(const DecoderConfig& c, const torch::TensorOptions& o) {
  ln_1 = register_module("ln_1", Gpt2LayerNorm(c.hidden_size, c.norm_eps, o));
  attn = register_module("attn", Gpt2Attention(c, o));
  ln_2 = register_module("ln_2", Gpt2LayerNorm(c.hidden_size, c.norm_eps, o));
  mlp = register_module("mlp", Gpt2Mlp(c, o));
}

torch::Tensor Gpt2BlockImpl::forward(const torch::Tensor& x, const NoRotation& still,
                                     KvCache* cache, int64_t layer) {
  auto h = x + attn(ln_1(x), still, cache, layer);
  return h + mlp(ln_2(h));
}

Gpt2ModelImpl::Gpt2ModelImpl(const DecoderConfig& c, const torch::TensorOptions& o,
                             const ModelPart& part) {
  const auto on = [&](bool here) { return here ? o : o.device(torch::kMeta); };
  wte = register_module("wte", Gpt2Embedding(c.vocab_size, c.hidden_size,
                                             on(part.has_token_embedding(c.tie_word_embeddings))));
  wpe = register_module("wpe", Gpt2Embedding(c.max_positions, c.hidden_size, on(part.embedding)));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) h->push_back(Gpt2Block(c, on(part.has_block(i))));
  ln_f = register_module("ln_f", Gpt2LayerNorm(c.hidden_size, c.norm_eps, on(part.head)));
}

// Parameters are created uninitialised on the device and filled there once (reset_parameters).
Gpt2LMHeadModel::Gpt2LMHeadModel(DecoderConfig c, torch::Device device, const ModelPart& part)
    : CausalLm(std::move(c)) {
  const auto o = torch::TensorOptions().dtype(torch::kFloat).device(device);
  transformer = register_module("transformer", Gpt2Model(config_, o, part));
  if (!config_.tie_word_embeddings)
    lm_head = register_module("lm_head", Gpt2Embedding(config_.vocab_size, config_.hidden_size,
                                                       part.head ? o : o.device(torch::kMeta)));
  reset_parameters();
}

void Gpt2LMHeadModel::set_fused_attention(bool on) {
  for (auto& block : *transformer->h) block->as<Gpt2BlockImpl>()->attn->fused = on;
}

void Gpt2LMHeadModel::init_parameter(const std::string& name, torch::Tensor& p) const {
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.num_layers));
  const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
  if (p.dim() >= 2)
    init_normal(p, name.find("c_proj.weight") != std::string::npos ? residual_std : 0.02);
  else
    p.fill_(is_bias ? 0.0 : 1.0);  // biases, LayerNorm scales
}

torch::Tensor Gpt2LMHeadModel::forward(const torch::Tensor& tokens, KvCache* cache) {
  const auto positions = begin_forward(tokens, cache);  // [T], or [B, T] with padding
  const int64_t t = tokens.size(1);
  auto h = transformer->wte(tokens) + transformer->wpe(positions);
  // The fused kernel's identity rotation, once for every block (without a cache only).
  const NoRotation still =
      cache == nullptr ? still_rotation(t, config_.dim_per_head(), tokens.device()) : NoRotation{};
  for (int64_t i = 0; i < config_.num_layers; ++i) h = run_layer(i, h, still, cache);
  h = head(head_input(h, cache));
  if (cache) cache->length += t;
  return h;
}

torch::Tensor Gpt2LMHeadModel::run_layer(int64_t i, const torch::Tensor& h, const NoRotation& still,
                                         KvCache* cache) {
  std::shared_ptr<torch::nn::Module> block = transformer->h[static_cast<size_t>(i)];
  auto* blk = block->as<Gpt2BlockImpl>();
  return run_block(block, h, [blk, still, cache, i](const torch::Tensor& x) {
    return blk->forward(x, still, cache, i);
  });
}

torch::Tensor Gpt2LMHeadModel::embed(const torch::Tensor& tokens) {
  const auto positions = torch::arange(tokens.size(1), tokens.options().dtype(torch::kLong));
  return transformer->wte(tokens) + transformer->wpe(positions);
}

torch::Tensor Gpt2LMHeadModel::block(int64_t i, const torch::Tensor& h) {
  return run_layer(i, h, still_rotation(h.size(1), config_.dim_per_head(), h.device()), nullptr);
}

torch::Tensor Gpt2LMHeadModel::head(const torch::Tensor& h) {
  return linear_product(transformer->ln_f(h), lm_head ? lm_head->weight : transformer->wte->weight);
}

}  // namespace gpulab::train
