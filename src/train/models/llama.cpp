// The Llama decoder's modules and forward pass (training, evaluation and KV-cached generation).
#include "train/models/llama.h"

#include <torch/version.h>

#include <cmath>

#include "core/error.h"
#include "train/models/activation_checkpoint.h"
#include "train/models/cpu_bf16_matmul.h"
#include "train/ops/causal_attention.h"
#include "train/ops/rms_norm.h"
#include "train/ops/swiglu.h"
#include "train/precision.h"
#include "train/unit_hooks.h"

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

// Half and bfloat16 compute their softmax and norms in float32 (as transformers does); float64,
// the numerics check, stays float64 so that no float32 rounding depends on the batch split.
torch::ScalarType at_least_float(torch::ScalarType t) {
  return t == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// q: B x H x T x D; k, v: B x H x S x D, where the last T of the S key positions are the
// queries' own. Causal: query i sees keys up to S - T + i.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t t = q.size(2), s = k.size(2);
#if TORCH_VERSION_MAJOR >= 2
  // The fused kernels (flash / memory-efficient on GPUs). Its is_causal aligns the mask to the
  // top left, which is right only without earlier positions; one new token sees everything.
  if (t == s || t == 1) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, t == s && t > 1);
  auto allowed = torch::ones({t, s}, q.options().dtype(torch::kBool)).tril(s - t);
  return at::scaled_dot_product_attention(q, k, v, allowed, 0.0, false);
#else
  auto scores = matrix_product(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  if (t > 1) {
    auto hidden = torch::ones({t, s}, q.options().dtype(torch::kBool)).triu(s - t + 1);
    scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
  }
  // Softmax in float32 under autocast, as Hugging Face's eager attention does.
  auto probs = torch::softmax(scores, -1, at_least_float(q.scalar_type())).to(v.scalar_type());
  return matrix_product(probs, v);
#endif
}

}  // namespace

bool has_fused_attention() {
  return TORCH_VERSION_MAJOR >= 2;
}

std::string attention_path(torch::Device device, torch::ScalarType compute, bool fused_allowed) {
  if (fused_allowed && fused_causal_attention_applies(torch::empty({0}, device).to(compute)))
    return "fused causal kernel (gpulab's CPU attention: no heads x T x T scores kept)";
  if (has_fused_attention()) return "scaled_dot_product_attention";
  return "masked softmax (this libtorch has no fused kernel)";
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t head_dim, double theta, int64_t start,
                                                      int64_t length, torch::Device device) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  // inv_freq in float32 as transformers computes it: 1 / theta^(2i / d).
  auto exponents =
      torch::arange(0, head_dim, 2, torch::TensorOptions().dtype(torch::kLong)).to(torch::kFloat) /
      static_cast<double>(head_dim);
  auto inv_freq = (1.0 / torch::pow(theta, exponents)).to(device);
  auto pos = torch::arange(start, start + length, f32);
  auto angles = torch::outer(pos, inv_freq);
  auto table = torch::cat({angles, angles}, -1);
  return {table.cos(), table.sin()};
}

ProjectionImpl::ProjectionImpl(int64_t in, int64_t out, const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({out, in}, options));
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

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& c, const torch::TensorOptions& o)
    : heads_(c.num_heads), kv_heads_(c.num_kv_heads), head_dim_(c.dim_per_head()) {
  q_proj = register_module("q_proj", Projection(c.hidden_size, heads_ * head_dim_, o));
  k_proj = register_module("k_proj", Projection(c.hidden_size, kv_heads_ * head_dim_, o));
  v_proj = register_module("v_proj", Projection(c.hidden_size, kv_heads_ * head_dim_, o));
  o_proj = register_module("o_proj", Projection(heads_ * head_dim_, c.hidden_size, o));
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                          const torch::Tensor& sin, KvCache* cache, int64_t layer) {
  const int64_t b = x.size(0), t = x.size(1);
  auto q = linear_product(x, q_proj->weight);
  auto k = linear_product(x, k_proj->weight);
  auto v = linear_product(x, v_proj->weight);
  if (fused && cache == nullptr && fused_causal_attention_applies(q))
    return linear_product(fused_causal_attention(q, k, v, cos, sin, heads_, kv_heads_),
                          o_proj->weight);
  q = q.view({b, t, heads_, head_dim_}).transpose(1, 2);
  k = k.view({b, t, kv_heads_, head_dim_}).transpose(1, 2);
  v = v.view({b, t, kv_heads_, head_dim_}).transpose(1, 2);
  q = apply_rotary(q, cos, sin);
  k = apply_rotary(k, cos, sin);
  if (cache != nullptr) {
    auto& ck = cache->keys[static_cast<size_t>(layer)];
    auto& cv = cache->values[static_cast<size_t>(layer)];
    if (ck.defined()) {
      k = torch::cat({ck, k.to(ck.scalar_type())}, 2);
      v = torch::cat({cv, v.to(cv.scalar_type())}, 2);
    }
    ck = k;
    cv = v;
  }
  if (kv_heads_ != heads_) {
    // Grouped-query attention: key/value head j serves query heads j*rep .. (j+1)*rep - 1.
    const int64_t rep = heads_ / kv_heads_, s = k.size(2);
    k = k.unsqueeze(2).expand({b, kv_heads_, rep, s, head_dim_}).reshape({b, heads_, s, head_dim_});
    v = v.unsqueeze(2).expand({b, kv_heads_, rep, s, head_dim_}).reshape({b, heads_, s, head_dim_});
  }
  auto out = attend(q, k.to(q.scalar_type()), v.to(q.scalar_type()));
  return linear_product(out.transpose(1, 2).reshape({b, t, heads_ * head_dim_}), o_proj->weight);
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaConfig& c, const torch::TensorOptions& o) {
  gate_proj = register_module("gate_proj", Projection(c.hidden_size, c.intermediate_size, o));
  up_proj = register_module("up_proj", Projection(c.hidden_size, c.intermediate_size, o));
  down_proj = register_module("down_proj", Projection(c.intermediate_size, c.hidden_size, o));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  return linear_product(
      swiglu(linear_product(x, gate_proj->weight), linear_product(x, up_proj->weight)),
      down_proj->weight);
}

LlamaBlockImpl::LlamaBlockImpl(const LlamaConfig& c, const torch::TensorOptions& o) {
  self_attn = register_module("self_attn", LlamaAttention(c, o));
  mlp = register_module("mlp", LlamaMlp(c, o));
  input_layernorm = register_module("input_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps, o));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps, o));
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                      const torch::Tensor& sin, KvCache* cache, int64_t layer) {
  auto h = x + self_attn(input_layernorm(x), cos, sin, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

LlamaModelImpl::LlamaModelImpl(const LlamaConfig& c, const torch::TensorOptions& o) {
  embed_tokens = register_module("embed_tokens", TokenEmbedding(c.vocab_size, c.hidden_size, o));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) layers->push_back(LlamaBlock(c, o));
  norm = register_module("norm", RmsNorm(c.hidden_size, c.rms_norm_eps, o));
}

// Parameters are created uninitialised on the device and filled there once (reset_parameters):
// a 1B model on a GPU skips 5 GB of CPU allocation, a CPU initialisation and the copy.
LlamaForCausalLM::LlamaForCausalLM(LlamaConfig c, torch::Device device) : config_(std::move(c)) {
  if (auto st = config_.validate(); !st) throw Exception(st.error());
  const auto o = torch::TensorOptions().dtype(torch::kFloat).device(device);
  model = register_module("model", LlamaModel(config_, o));
  if (!config_.tie_word_embeddings)
    lm_head = register_module("lm_head", Projection(config_.hidden_size, config_.vocab_size, o));
  reset_parameters();
}

void LlamaForCausalLM::set_fused_attention(bool on) {
  for (auto& layer : *model->layers) layer->as<LlamaBlockImpl>()->self_attn->fused = on;
}

void LlamaForCausalLM::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    if (p.value().dim() >= 2)
      p.value().normal_(0.0, 0.02);
    else
      p.value().fill_(1.0);  // RMSNorm scales
  }
}

torch::Tensor LlamaForCausalLM::forward(const torch::Tensor& tokens, KvCache* cache) {
  const int64_t start = cache ? cache->length : 0, t = tokens.size(1);
  if (start + t > config_.max_positions)
    throw Exception(Code::kInvalidArgument,
                    "sequence of " + std::to_string(start + t) + " positions is longer than " +
                        config_.name + "'s " + std::to_string(config_.max_positions),
                    "use a shorter --seq_len (or fewer --max_new_tokens)");
  if (cache && cache->keys.empty()) {
    cache->keys.resize(static_cast<size_t>(config_.num_layers));
    cache->values.resize(static_cast<size_t>(config_.num_layers));
  }
  auto h = model->embed_tokens(tokens);
  auto [cos, sin] =
      rotary_tables(config_.dim_per_head(), config_.rope_theta, start, t, tokens.device());
  const bool recompute = checkpointing_ && is_training() && torch::GradMode::is_enabled();
  const Precision autocast = active_autocast(tokens.device());
  const torch::Device device = tokens.device();
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    std::shared_ptr<torch::nn::Module> block = model->layers[static_cast<size_t>(i)];
    auto* blk = block->as<LlamaBlockImpl>();
    if (recompute) {
      // The recomputation runs under the autocast this forward pass runs under.
      auto fn = [block, blk, cos = cos, sin = sin, autocast, device](const torch::Tensor& x) {
        AutocastGuard guard(autocast, device);
        return blk->forward(x, cos, sin);
      };
      h = checkpointed(fn, h, blk->parameters());
    } else {
      // Sharded data parallel gathers the block around this call (a plain call otherwise). With
      // recomputation the block stays gathered: its backward re-runs the forward itself.
      h = run_unit(*block, [&] { return blk->forward(h, cos, sin, cache, i); });
    }
  }
  h = model->norm(h);
  if (cache) cache->length += t;
  return linear_product(h, lm_head ? lm_head->weight : model->embed_tokens->weight);
}

}  // namespace gpulab::train
