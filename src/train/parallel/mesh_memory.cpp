// mesh_memory: the per-rank element counts and Korthikanti's activation formula.
#include "train/parallel/mesh_memory.h"

#include <algorithm>

#include "core/error.h"
#include "core/int_math.h"
#include "train/parallel/pipeline_split.h"

namespace gpulab::train::parallel {

namespace {

// The vocabulary rows one TP rank holds (padded to a multiple of tp).
int64_t vocab_rows(const DecoderShape& m, int tp) {
  return ceil_div(m.vocab, tp);
}

int64_t head_size(const DecoderShape& m) {
  return m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
}

// One norm's elements: LayerNorm's scale and bias, or RMSNorm's scale.
int64_t norm_params(const DecoderShape& m) {
  return (m.norm_bias ? 2 : 1) * m.hidden;
}

// A block's widths: the query heads' (Q's outputs, O's inputs), the kv heads' (K's and V's
// outputs), and its MLP's matrices.
struct BlockParts {
  int64_t q = 0;
  int64_t kv = 0;
  int64_t mlp = 0;
};

BlockParts block_parts(const DecoderShape& m) {
  return {m.heads * head_size(m), m.kv_heads * head_size(m),
          (m.gated_mlp ? 3 : 2) * m.hidden * m.ffn};
}

// A block's weight matrices (what its products cost; biases and norms are not products).
int64_t block_matrices(const DecoderShape& m) {
  const BlockParts b = block_parts(m);
  return 2 * m.hidden * b.q + 2 * m.hidden * b.kv + b.mlp;
}

}  // namespace

int64_t layer_params(const DecoderShape& m, int tp) {
  const auto [q, kv, mlp] = block_parts(m);
  // Q and O split by heads, K and V by kv heads (replicated when fewer than tp: each rank keeps
  // the group its query heads use), the MLP by its inner width; the norms on every rank.
  const int64_t kv_split = std::min<int64_t>(tp, m.kv_heads);
  int64_t n = 2 * m.hidden * q / tp + 2 * m.hidden * kv / kv_split + mlp / tp + 2 * norm_params(m);
  if (m.biases || m.qkv_biases) n += q / tp + 2 * kv / kv_split;  // column-parallel Q, K, V
  // The MLP's column-parallel input biases split; the row-parallel output projections' whole.
  if (m.biases) n += (m.gated_mlp ? 2 : 1) * m.ffn / tp + 2 * m.hidden;
  return n;
}

int64_t model_params(const DecoderShape& m) {
  const int64_t embeddings = (m.tied_embeddings ? 1 : 2) * m.vocab * m.hidden;
  return m.layers * layer_params(m, 1) + embeddings + m.positions * m.hidden + norm_params(m);
}

int64_t layer_activation_bytes(const MeshMemoryQuery& q) {
  // Korthikanti et al.'s accounting per layer, in 2-byte units of s b h (s sequence, b
  // micro-batch, h hidden, a heads, t TP, f FFN width, h_kv = kv heads x head size):
  //  outside the TP regions (replicated under TP alone, split t ways under sequence parallelism):
  //    the two norms' inputs (4) and outputs, which the QKV and MLP products keep (4), and
  //    GPT's two dropout masks (2): 10 for GPT, 8 without dropout. gpulab's RMSNorm also keeps
  //    its normalised input (+4), and under sequence parallelism its products keep the gathered
  //    outputs whole (those 4 are not split).
  //  inside (split t ways): Q, K and V (2 + 4 h_kv / h), the output projection's input (2), the
  //    MLP's tensors of width f (GELU: its input and output, 4 f / h; SwiGLU: gate, up, the
  //    gate's activation and the product, 8 f / h): 24 for GPT (f = 4h); and the attention
  //    scores, 5 a s / h with dropout (softmax output, mask, dropped output), 2 a s / h without.
  // So TP alone s b h (10 + 24/t + 5 a s / (h t)), with sequence parallelism
  // s b h / t (34 + 5 a s / h) for GPT, as the paper has it. Selective recomputation (and any
  // attention that keeps no scores: flash, gpulab's kernel) drops the score term; full
  // recomputation keeps each layer's input alone, 2 s b h (split t ways under sequence
  // parallelism). In doubles: the terms are fractions of s b h.
  const DecoderShape& m = q.model;
  const bool gpulab = q.activation_model == ActivationModel::kGpulab;
  const double s = static_cast<double>(q.seq_len), b = static_cast<double>(q.micro_batch);
  const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads);
  const double kv = static_cast<double>(m.kv_heads * head_size(m));
  const double f = static_cast<double>(m.ffn);
  const double t = q.tp;
  const double sp = q.sequence_parallel ? t : 1.0;  // what sequence parallelism divides by
  // Outside: the norms' inputs (and gpulab's normalised copies) and dropout masks, then the
  // products' inputs (kept whole by gpulab's sequence parallelism).
  const double norms = 4.0 + (gpulab ? 4.0 : 0.0) + (m.dropout ? 2.0 : 0.0);
  const double outside = norms / sp + 4.0 / (gpulab ? 1.0 : sp);
  double inside = 2 + 2 + (m.gated_mlp ? 8 : 4) * f / h;
  if (q.recompute == Recompute::kNone) inside += (m.dropout ? 5 : 2) * a * s / h;
  // K and V split over at most kv-heads ranks (a replicated kv head is computed by each holder).
  const double kv_inside = 4 * kv / h / std::min<double>(t, static_cast<double>(m.kv_heads));
  const double units = q.recompute == Recompute::kFull ? 2 / sp : outside + inside / t + kv_inside;
  return static_cast<int64_t>(s * b * h * units * static_cast<double>(q.activation_bytes) / 2.0 +
                              0.5);
}

namespace {

// What the first and the last stage hold beside their layers: the embedding (and a learned
// position table); the final norm and
// the output layer (a tied one too when it is on another stage than the embedding: it needs the
// weight). With one stage, one rank holds all of them once.
struct StageExtras {
  int64_t first = 0;
  int64_t last = 0;
};

StageExtras stage_extras(const DecoderShape& m, int tp, int pp) {
  const int64_t table = vocab_rows(m, tp) * m.hidden;
  // A learned position table is replicated on the first stage's TP ranks.
  return {
      table + m.positions * m.hidden,
      norm_params(m) + (m.tied_embeddings && pp > 1 ? table : 0) + (m.tied_embeddings ? 0 : table)};
}

}  // namespace

std::vector<int64_t> stage_layers(const DecoderShape& m, int pp, int64_t seq_len) {
  const StageCosts costs =
      decoder_stage_costs(m.hidden, block_matrices(m), m.heads * head_size(m), m.vocab, seq_len);
  std::vector<int64_t> out;
  for (const StageSpan& s : split_stages(m.layers, pp, 1, costs)) out.push_back(s.num_blocks);
  return out;
}

MeshMemory mesh_memory(const MeshMemoryQuery& q) {
  const DecoderShape& m = q.model;
  const std::vector<int64_t> layers = stage_layers(m, q.pp, q.seq_len);
  GPULAB_ASSERT(static_cast<int64_t>(layers.size()) == q.pp, "pp above the layers");
  const StageExtras x = stage_extras(m, q.tp, q.pp);
  const int64_t per_layer = layer_activation_bytes(q);
  MeshMemory worst;
  for (int s = 0; s < q.pp; ++s) {
    MeshMemory out;
    out.stage = s;
    out.stage_layers = layers[static_cast<size_t>(s)];
    out.params_per_gpu = out.stage_layers * layer_params(m, q.tp) + (s == 0 ? x.first : 0) +
                         (s == q.pp - 1 ? x.last : 0);
    const int64_t n = out.params_per_gpu;
    const int64_t sharded = ceil_div(n, q.dp);
    out.params = (q.shard >= 3 ? sharded : n) * q.param_bytes;
    out.grads = (q.shard >= 2 ? sharded : n) * q.grad_bytes;
    out.optimizer = (q.shard >= 1 ? sharded : n) * q.optimizer_bytes;
    // 1F1B: stage s keeps the activations of min(pp - s, micro-batches) micro-batches.
    const int64_t in_flight = std::min<int64_t>(q.pp - s, q.micro_batches);
    out.activations = out.stage_layers * in_flight * per_layer;
    if (s == 0 || out.total() > worst.total()) worst = out;
  }
  return worst;
}

}  // namespace gpulab::train::parallel
