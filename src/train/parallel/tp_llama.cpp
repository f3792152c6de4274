// The tensor-parallel Llama's modules and forward pass (see tp_llama.h).
#include "train/parallel/tp_llama.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/ops/swiglu.h"
#include "train/parallel/tp_gradients.h"
#include "train/parallel/tp_llama_state.h"
#include "train/parallel/tp_regions.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

namespace gpulab::train::parallel {

TpLlamaAttentionImpl::TpLlamaAttentionImpl(TpGroup& g, const DecoderConfig& c,
                                           const torch::TensorOptions& o)
    : group_(&g),
      local_heads_(c.num_heads / g.size()),
      local_kv_heads_(kv_replicas(c, g.size()) > 1 ? 1 : c.num_kv_heads / g.size()) {
  const int64_t d = c.dim_per_head(), h = c.hidden_size;
  // k and v: this rank's kv heads, or the one it shares when kv heads are fewer than ranks (the
  // layer's width is given as tp times the local rows).
  const int64_t kv_width = local_kv_heads_ * d * g.size();
  // Qwen2's q/k/v biases split with their rows (a bias is one value per output row).
  const bool bias = c.traits().qkv_biases;
  q_proj = register_module("q_proj", ColumnParallelLinear(g, h, c.num_heads * d, bias, false, o));
  k_proj = register_module("k_proj", ColumnParallelLinear(g, h, kv_width, bias, false, o));
  v_proj = register_module("v_proj", ColumnParallelLinear(g, h, kv_width, bias, false, o));
  o_proj = register_module("o_proj", RowParallelLinear(g, c.num_heads * d, h, false, true, o));
}

torch::Tensor TpLlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin, bool sp) {
  // Rank r's rows of q are query heads [r H/tp, (r+1) H/tp), which use exactly kv heads
  // [r KV/tp, (r+1) KV/tp) (with fewer kv heads than ranks, kv head r / (tp/KV) alone): its rows
  // of k and v. The heads are independent, so each rank runs the whole model's attention on its
  // own heads.
  auto xc = enter_tp(x, *group_, sp);
  auto q = q_proj->forward_in_region(xc);
  auto k = k_proj->forward_in_region(xc);
  auto v = v_proj->forward_in_region(xc);
  auto heads =
      rotary_causal_attention(q, k, v, cos, sin, local_heads_, local_kv_heads_, fused, nullptr);
  return leave_tp(o_proj->forward_partial(heads), *group_, sp);
}

TpLlamaMlpImpl::TpLlamaMlpImpl(TpGroup& g, const DecoderConfig& c, const torch::TensorOptions& o)
    : group_(&g) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  gate_proj = register_module("gate_proj", ColumnParallelLinear(g, h, f, false, false, o));
  up_proj = register_module("up_proj", ColumnParallelLinear(g, h, f, false, false, o));
  down_proj = register_module("down_proj", RowParallelLinear(g, f, h, false, true, o));
}

torch::Tensor TpLlamaMlpImpl::forward(const torch::Tensor& x, bool sp) {
  // SwiGLU is elementwise, so it runs on each rank's slice of the FFN width unchanged.
  auto xc = enter_tp(x, *group_, sp);
  auto act = swiglu(gate_proj->forward_in_region(xc), up_proj->forward_in_region(xc));
  return leave_tp(down_proj->forward_partial(act), *group_, sp);
}

TpLlamaBlockImpl::TpLlamaBlockImpl(TpGroup& g, const DecoderConfig& c,
                                   const torch::TensorOptions& o) {
  self_attn = register_module("self_attn", TpLlamaAttention(g, c, o));
  mlp = register_module("mlp", TpLlamaMlp(g, c, o));
  input_layernorm = register_module("input_layernorm", RmsNorm(c.hidden_size, c.norm_eps, o));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.norm_eps, o));
}

torch::Tensor TpLlamaBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                        const torch::Tensor& sin, bool sp) {
  auto h = x + self_attn(input_layernorm(x), cos, sin, sp);
  return h + mlp(post_attention_layernorm(h), sp);
}

TpLlamaModelImpl::TpLlamaModelImpl(TpGroup& g, const DecoderConfig& c, const ModelPart& part) {
  const auto on = [](bool here) {
    return here ? torch::TensorOptions() : torch::device(torch::kMeta);
  };
  embed_tokens = register_module(
      "embed_tokens", VocabParallelEmbedding(g, c.vocab_size, c.hidden_size,
                                             on(part.has_token_embedding(c.tie_word_embeddings))));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i)
    layers->push_back(TpLlamaBlock(g, c, on(part.has_block(i))));
  norm = register_module("norm", RmsNorm(c.hidden_size, c.norm_eps, on(part.head)));
}

TpLlamaForCausalLM::TpLlamaForCausalLM(TpGroup& g, DecoderConfig c, const StateDict& shard,
                                       const ModelPart& part)
    : TpCausalLm(g, std::move(c)) {
  check_tp_layout(config_, g.size());
  model = register_module("model", TpLlamaModel(g, config_, part));
  if (!config_.tie_word_embeddings)
    lm_head = register_module(
        "lm_head", ColumnParallelLinear(
                       g, config_.hidden_size, padded_to(config_.vocab_size, g.size()), false,
                       false, part.head ? torch::TensorOptions() : torch::device(torch::kMeta)));
  for (const auto& [name, t] : shard) {
    if (t.is_floating_point()) {
      to(t.scalar_type());  // the shard's precision (fp64 for the numerics checks)
      break;
    }
  }
  if (shard.empty()) return;  // filled by the caller (build_tp_causal_lm)
  load_shard(shard);
}

int64_t TpLlamaForCausalLM::vocab_start() const {
  return model->embed_tokens->vocab_start();
}

void TpLlamaForCausalLM::set_fused_attention(bool on) {
  for (auto& layer : *model->layers) layer->as<TpLlamaBlockImpl>()->self_attn->fused = on;
}

void TpLlamaForCausalLM::reset_parameters() {
  throw Exception(Code::kUnsupported, "a tensor-parallel model takes its weights from a shard",
                  "initialise the ordinary model and shard its state dict (shard_state)");
}

torch::Tensor TpLlamaForCausalLM::forward(const torch::Tensor& tokens, KvCache* cache) {
  GPULAB_ASSERT(cache == nullptr, "the tensor-parallel model has no KV cache");
  auto h = embed(tokens);
  auto [cos, sin] =
      rotary_tables(config_.dim_per_head(), config_.rope_theta, 0, tokens.size(1), tokens.device());
  for (int64_t i = 0; i < config_.num_layers; ++i) h = tp_block(i, h, cos, sin);
  return head(h);
}

torch::Tensor TpLlamaForCausalLM::embed(const torch::Tensor& tokens) {
  check_sequence(tokens.size(1));
  const bool sp = sequence_parallel;
  return sp ? reduce_scatter_sequence(model->embed_tokens->forward_partial(tokens), *group_)
            : model->embed_tokens(tokens);
}

// Under sequence parallelism h holds this rank's 1/TP of the positions; the rotary tables cover
// the whole sequence (attention gathers it).
torch::Tensor TpLlamaForCausalLM::block(int64_t i, const torch::Tensor& h) {
  const int64_t t = h.size(1) * (sequence_parallel ? group_->size() : 1);
  auto [cos, sin] = rotary_tables(config_.dim_per_head(), config_.rope_theta, 0, t, h.device());
  return tp_block(i, h, cos, sin);
}

torch::Tensor TpLlamaForCausalLM::tp_block(int64_t i, const torch::Tensor& h,
                                           const torch::Tensor& cos, const torch::Tensor& sin) {
  // Through run_block, as the ordinary model's blocks: recomputed in the backward pass under
  // --activation_checkpointing (every rank of the group re-runs the block's collectives in the
  // same order), gathered and freed around its use by ZeRO-3 over the data-parallel ranks.
  auto block = model->layers[i];
  auto* impl = block->as<TpLlamaBlockImpl>();
  const bool sp = sequence_parallel;
  return run_block(block, h, [impl, cos, sin, sp](const torch::Tensor& x) {
    return impl->forward(x, cos, sin, sp);
  });
}

torch::Tensor TpLlamaForCausalLM::head(const torch::Tensor& h) {
  auto hc = enter_tp(model->norm(h), *group_, sequence_parallel);
  // Tied: the embedding's rows are the output layer's, split over the vocabulary the same way.
  auto logits =
      torch::nn::functional::linear(hc, lm_head ? lm_head->weight : model->embed_tokens->weight);
  if (is_training()) return logits;
  return group_->gather_last_dim(logits, "evaluation logits").narrow(-1, 0, config_.vocab_size);
}

void TpLlamaForCausalLM::finish_gradients(const std::vector<NamedGrad>& grads) {
  std::vector<torch::Tensor> norms, kv;
  for (const auto& g : grads) {
    if (tp_split_dim(g.name) < 0) norms.push_back(g.grad);
    if (tp_kv_rows(g.name)) kv.push_back(g.grad);
  }
  // Under sequence parallelism each rank's norm gradients cover its own positions only.
  if (sequence_parallel) allreduce_sum_together(norms, *group_, "sequence-parallel norm gradients");
  // A kv head kept by several ranks has, on each, the gradient of that rank's query heads only;
  // the head's gradient is their sum. One all-reduce of a slot per kv head (this rank's in its
  // head's slot, zeros elsewhere) sums each slot over its holders.
  const int replicas = kv_replicas(config_, group_->size());
  if (replicas > 1 && !kv.empty()) {
    auto mine = flatten_together(kv);
    auto slots = torch::zeros({config_.num_kv_heads, mine.numel()}, mine.options());
    const int64_t head = group_->rank() / replicas;
    slots[head].copy_(mine);
    group_->allreduce_sum(slots, "replicated key/value-head gradients");
    unflatten_into(slots[head], kv);
  }
}

double TpLlamaForCausalLM::clip_grad_norm(const std::vector<NamedGrad>& grads, double max_norm,
                                          dist::Communicator* disjoint) {
  // Split gradients summed over the group (a replicated kv head by its first holder alone),
  // replicated ones (the norms, equal on every rank) added once.
  const int replicas = kv_replicas(config_, group_->size());
  std::vector<torch::Tensor> split, replicated, all;
  for (const auto& g : grads) {
    all.push_back(g.grad);
    if (tp_split_dim(g.name) < 0)
      replicated.push_back(g.grad);
    else if (!tp_kv_rows(g.name) || replicas == 1 || group_->rank() % replicas == 0)
      split.push_back(g.grad);
  }
  return clip_tp_gradients(split, replicated, all, max_norm, disjoint, *group_);
}

torch::Tensor TpLlamaForCausalLM::mean_loss(const torch::Tensor& logits,
                                            const torch::Tensor& targets) {
  return vocab_parallel_mean_loss(logits, targets, *group_, vocab_start(), config_.vocab_size,
                                  label_smoothing);
}

std::pair<torch::Tensor, torch::Tensor> TpLlamaForCausalLM::loss_of(const torch::Tensor& logits,
                                                                    const torch::Tensor& targets) {
  const auto items = logits.detach().reshape({-1, logits.size(-1)});
  auto best = vocab_parallel_argmax(items, *group_, vocab_start(), config_.vocab_size);
  return {mean_loss(logits, targets), best.eq(targets.reshape({-1})).sum()};
}

torch::Tensor TpLlamaForCausalLM::loss(const torch::Tensor& tokens, const torch::Tensor& targets) {
  return mean_loss(forward(tokens), targets);
}

StateDict TpLlamaForCausalLM::shard(const StateDict& full) const {
  return shard_state(config_, full, group_->rank(), group_->size());
}

StateDict TpLlamaForCausalLM::gather(const StateDict& mine) {
  return gather_state(config_, mine, *group_);
}

TpSlices TpLlamaForCausalLM::slices_of(const std::string& name, c10::IntArrayRef whole) const {
  return llama_slices(config_, name, whole, group_->rank(), group_->size());
}

}  // namespace gpulab::train::parallel
