// The tensor-parallel GPT-2's modules and forward pass (see tp_gpt2.h).
#include "train/parallel/tp_gpt2.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "train/models/cpu_bf16_matmul.h"
#include "train/ops/onednn_linear.h"
#include "train/parallel/tp_gpt2_state.h"
#include "train/parallel/tp_gradients.h"
#include "train/parallel/tp_llama_state.h"
#include "train/parallel/tp_regions.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

namespace gpulab::train::parallel {

namespace {

// A row-parallel Conv1D's output: this rank's partial product summed over the group (or
// reduce-scattered over the sequence), then the whole bias, once, in the product's dtype (as
// Conv1D's addmm adds it under autocast).
torch::Tensor row_parallel(const Gpt2Linear& layer, const torch::Tensor& x_split, TpGroup& g,
                           bool sp) {
  auto y = leave_tp(dense_linear(x_split, layer->weight.t()), g, sp);
  return y + layer->bias.to(y.scalar_type());
}

torch::ScalarType dtype_of(const StateDict& shard) {
  for (const auto& [name, t] : shard)
    if (t.is_floating_point()) return t.scalar_type();
  return torch::kFloat;
}

}  // namespace

TpGpt2AttentionImpl::TpGpt2AttentionImpl(TpGroup& g, const DecoderConfig& c,
                                         const torch::TensorOptions& o)
    : group_(&g), local_heads_(c.num_heads / g.size()) {
  const int64_t local = local_heads_ * c.dim_per_head();
  c_attn = register_module("c_attn", Gpt2Linear(c.hidden_size, 3 * local, o));
  c_proj = register_module("c_proj", Gpt2Linear(local, c.hidden_size, o));
}

torch::Tensor TpGpt2AttentionImpl::forward(const torch::Tensor& x, const NoRotation& still,
                                           bool sp) {
  // This rank's columns of c_attn are its heads' q, then k, then v: the whole model's
  // attention on its own heads.
  auto qkv = c_attn(enter_tp(x, *group_, sp)).chunk(3, -1);
  auto heads = gpt2_attention(qkv[0], qkv[1], qkv[2], local_heads_, still, fused);
  return row_parallel(c_proj, heads, *group_, sp);
}

TpGpt2MlpImpl::TpGpt2MlpImpl(TpGroup& g, const DecoderConfig& c, const torch::TensorOptions& o)
    : group_(&g) {
  const int64_t local = c.intermediate_size / g.size();
  c_fc = register_module("c_fc", Gpt2Linear(c.hidden_size, local, o));
  c_proj = register_module("c_proj", Gpt2Linear(local, c.hidden_size, o));
}

torch::Tensor TpGpt2MlpImpl::forward(const torch::Tensor& x, bool sp) {
  // GELU is elementwise, so it runs on each rank's slice of the FFN width unchanged.
  auto act = torch::gelu(c_fc(enter_tp(x, *group_, sp)), "tanh");
  return row_parallel(c_proj, act, *group_, sp);
}

TpGpt2BlockImpl::TpGpt2BlockImpl(TpGroup& g, const DecoderConfig& c,
                                 const torch::TensorOptions& o) {
  ln_1 = register_module("ln_1", Gpt2LayerNorm(c.hidden_size, c.norm_eps, o));
  attn = register_module("attn", TpGpt2Attention(g, c, o));
  ln_2 = register_module("ln_2", Gpt2LayerNorm(c.hidden_size, c.norm_eps, o));
  mlp = register_module("mlp", TpGpt2Mlp(g, c, o));
}

torch::Tensor TpGpt2BlockImpl::forward(const torch::Tensor& x, const NoRotation& still, bool sp) {
  auto h = x + attn(ln_1(x), still, sp);
  return h + mlp(ln_2(h), sp);
}

TpGpt2ModelImpl::TpGpt2ModelImpl(TpGroup& g, const DecoderConfig& c, const torch::TensorOptions& o,
                                 const ModelPart& part) {
  const auto on = [&o](bool here) { return here ? o : o.device(torch::kMeta); };
  const auto meta = [](bool here) {
    return here ? torch::TensorOptions() : torch::device(torch::kMeta);
  };
  wte = register_module(
      "wte", VocabParallelEmbedding(g, c.vocab_size, c.hidden_size,
                                    meta(part.has_token_embedding(c.tie_word_embeddings))));
  wpe = register_module("wpe", Gpt2Embedding(c.max_positions, c.hidden_size, on(part.embedding)));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) h->push_back(TpGpt2Block(g, c, on(part.has_block(i))));
  ln_f = register_module("ln_f", Gpt2LayerNorm(c.hidden_size, c.norm_eps, on(part.head)));
}

TpGpt2LMHeadModel::TpGpt2LMHeadModel(TpGroup& g, DecoderConfig c, const StateDict& shard,
                                     const ModelPart& part)
    : TpCausalLm(g, std::move(c)) {
  check_tp_layout(config_, g.size());
  const auto o = torch::TensorOptions().dtype(dtype_of(shard));
  transformer = register_module("transformer", TpGpt2Model(g, config_, o, part));
  if (!config_.tie_word_embeddings)
    lm_head = register_module(
        "lm_head", ColumnParallelLinear(
                       g, config_.hidden_size, padded_to(config_.vocab_size, g.size()), false,
                       false, part.head ? torch::TensorOptions() : torch::device(torch::kMeta)));
  to(o.dtype().toScalarType());  // the vocabulary-parallel layers are made in float
  if (shard.empty()) return;     // filled by the caller (build_tp_causal_lm)
  load_shard(shard);
}

int64_t TpGpt2LMHeadModel::vocab_start() const {
  return transformer->wte->vocab_start();
}

void TpGpt2LMHeadModel::set_fused_attention(bool on) {
  for (auto& block : *transformer->h) block->as<TpGpt2BlockImpl>()->attn->fused = on;
}

void TpGpt2LMHeadModel::reset_parameters() {
  throw Exception(Code::kUnsupported, "a tensor-parallel model takes its weights from a shard",
                  "initialise the ordinary model and shard its state dict (gpt2_shard_state)");
}

torch::Tensor TpGpt2LMHeadModel::forward(const torch::Tensor& tokens, KvCache* cache) {
  GPULAB_ASSERT(cache == nullptr, "the tensor-parallel model has no KV cache");
  auto h = embed(tokens);
  const NoRotation still = still_rotation(tokens.size(1), config_.dim_per_head(), tokens.device());
  for (int64_t i = 0; i < config_.num_layers; ++i) h = tp_block(i, h, still);
  return head(h);
}

torch::Tensor TpGpt2LMHeadModel::embed(const torch::Tensor& tokens) {
  const int64_t t = tokens.size(1);
  check_sequence(t);
  const auto ids = tokens.options().dtype(torch::kLong);
  if (!sequence_parallel) return transformer->wte(tokens) + transformer->wpe(torch::arange(t, ids));
  // This rank's positions of the token rows, and their rows of the position table.
  const int64_t part = t / group_->size(), first = group_->rank() * part;
  return reduce_scatter_sequence(transformer->wte->forward_partial(tokens), *group_) +
         transformer->wpe(torch::arange(first, first + part, ids));
}

// Under sequence parallelism h holds this rank's 1/TP of the positions; attention gathers the
// whole sequence, which `still` covers.
torch::Tensor TpGpt2LMHeadModel::block(int64_t i, const torch::Tensor& h) {
  const int64_t t = h.size(1) * (sequence_parallel ? group_->size() : 1);
  return tp_block(i, h, still_rotation(t, config_.dim_per_head(), h.device()));
}

torch::Tensor TpGpt2LMHeadModel::tp_block(int64_t i, const torch::Tensor& h,
                                          const NoRotation& still) {
  // Through run_block, as the ordinary model's blocks: recomputed under
  // --activation_checkpointing (every rank re-runs the block's collectives in the same order),
  // gathered and freed around its use by ZeRO-3 over the data-parallel ranks.
  auto block = transformer->h[static_cast<size_t>(i)];
  auto* impl = block->as<TpGpt2BlockImpl>();
  const bool sp = sequence_parallel;
  return run_block(
      block, h, [impl, still, sp](const torch::Tensor& x) { return impl->forward(x, still, sp); });
}

torch::Tensor TpGpt2LMHeadModel::head(const torch::Tensor& h) {
  auto hc = enter_tp(transformer->ln_f(h), *group_, sequence_parallel);
  // Tied: the embedding's rows are the output layer's, split over the vocabulary the same way,
  // so the token embedding's gradient holds both uses on every rank.
  auto logits = linear_product(hc, lm_head ? lm_head->weight : transformer->wte->weight);
  if (is_training()) return logits;
  return group_->gather_last_dim(logits, "evaluation logits").narrow(-1, 0, config_.vocab_size);
}

std::pair<torch::Tensor, torch::Tensor> TpGpt2LMHeadModel::loss_of(const torch::Tensor& logits,
                                                                   const torch::Tensor& targets) {
  const auto items = logits.detach().reshape({-1, logits.size(-1)});
  auto best = vocab_parallel_argmax(items, *group_, vocab_start(), config_.vocab_size);
  return {vocab_parallel_mean_loss(logits, targets, *group_, vocab_start(), config_.vocab_size,
                                   label_smoothing),
          best.eq(targets.reshape({-1})).sum()};
}

void TpGpt2LMHeadModel::finish_gradients(const std::vector<NamedGrad>& grads) {
  // Under sequence parallelism the replicated tensors' gradients (LayerNorms, the row-parallel
  // biases, the position rows) cover this rank's positions only: the whole is their sum.
  if (!sequence_parallel) return;
  std::vector<torch::Tensor> replicated;
  for (const auto& g : grads)
    if (gpt2_split(g.name).dim < 0) replicated.push_back(g.grad);
  allreduce_sum_together(replicated, *group_, "sequence-parallel replicated gradients");
}

double TpGpt2LMHeadModel::clip_grad_norm(const std::vector<NamedGrad>& grads, double max_norm,
                                         dist::Communicator* disjoint) {
  std::vector<torch::Tensor> split, replicated, all;
  for (const auto& g : grads) {
    all.push_back(g.grad);
    (gpt2_split(g.name).dim < 0 ? replicated : split).push_back(g.grad);
  }
  return clip_tp_gradients(split, replicated, all, max_norm, disjoint, *group_);
}

StateDict TpGpt2LMHeadModel::shard(const StateDict& full) const {
  return gpt2_shard_state(config_, full, group_->rank(), group_->size());
}

StateDict TpGpt2LMHeadModel::gather(const StateDict& mine) {
  return gpt2_gather_state(config_, mine, *group_);
}

TpSlices TpGpt2LMHeadModel::slices_of(const std::string& name, c10::IntArrayRef whole) const {
  return gpt2_slices(config_, name, whole, group_->rank(), group_->size());
}

}  // namespace gpulab::train::parallel
