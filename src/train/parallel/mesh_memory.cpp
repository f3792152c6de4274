// mesh_memory: the per-rank element counts and Korthikanti's activation formula.
#include "train/parallel/mesh_memory.h"

#include <algorithm>

namespace gpulab::train::parallel {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The vocabulary rows one TP rank holds (padded to a multiple of tp).
int64_t vocab_rows(const DecoderShape& m, int tp) {
  return ceil_div(m.vocab, tp);
}

}  // namespace

int64_t layer_params(const DecoderShape& m, int tp) {
  const int64_t head_dim = m.hidden / m.heads;
  const int64_t attention = 2 * m.hidden * m.hidden + 2 * m.hidden * m.kv_heads * head_dim;
  const int64_t mlp = (m.gated_mlp ? 3 : 2) * m.hidden * m.ffn;
  // Q and O split by heads, K and V by kv heads (replicated when fewer than tp: each rank keeps
  // the group its query heads use), the MLP by its inner width; two norms on every rank.
  const int64_t kv_split = std::min<int64_t>(tp, m.kv_heads);
  const int64_t kv = 2 * m.hidden * m.kv_heads * head_dim;
  return (attention - kv) / tp + kv / kv_split + mlp / tp + 2 * m.hidden;
}

int64_t model_params(const DecoderShape& m) {
  const int64_t embeddings = (m.tied_embeddings ? 1 : 2) * m.vocab * m.hidden;
  return m.layers * layer_params(m, 1) + embeddings + m.hidden;  // + the final norm
}

int64_t layer_activation_bytes(const MeshMemoryQuery& q) {
  // Per layer, 2-byte activations, s sequence, b micro-batch, h hidden, a heads, t TP:
  //   TP alone:           s b h (10 + 24/t + 5 a s / (h t))
  //   TP + sequence par.: s b h / t (34 + 5 a s / h)
  // Selective recomputation drops the 5 a s / h attention term; full recomputation keeps only
  // each layer's input, 2 s b h (split t ways under sequence parallelism). Evaluated in
  // doubles: the terms are fractions of s b h.
  const double s = static_cast<double>(q.seq_len), b = static_cast<double>(q.micro_batch);
  const double h = static_cast<double>(q.model.hidden), a = static_cast<double>(q.model.heads);
  const double t = q.tp;
  const double sbh = s * b * h;
  const double attention = q.recompute == Recompute::kNone ? 5 * a * s / h : 0.0;
  double bytes = 0;
  if (q.recompute == Recompute::kFull)
    bytes = 2 * sbh / (q.sequence_parallel ? t : 1.0);
  else if (q.sequence_parallel)
    bytes = sbh / t * (34 + attention);
  else
    bytes = sbh * (10 + 24 / t + attention / t);
  return static_cast<int64_t>(bytes * static_cast<double>(q.activation_bytes) / 2.0 + 0.5);
}

MeshMemory mesh_memory(const MeshMemoryQuery& q) {
  const DecoderShape& m = q.model;
  const int64_t stage_layers = ceil_div(m.layers, q.pp);
  const int64_t layers = stage_layers * layer_params(m, q.tp);
  const int64_t table = vocab_rows(m, q.tp) * m.hidden;
  // The first stage holds the embedding, the last the final norm and the output layer (a tied
  // one too: it needs the weight); with one stage, one rank holds all of them.
  const int64_t first = layers + table;
  const int64_t last = layers + m.hidden + (m.tied_embeddings && q.pp > 1 ? table : 0) +
                       (m.tied_embeddings ? 0 : table);
  MeshMemory out;
  out.params_per_gpu = q.pp == 1 ? first + last - layers : std::max(first, last);
  const int64_t n = out.params_per_gpu;
  const int64_t sharded = ceil_div(n, q.dp);
  out.params = (q.shard >= 3 ? sharded : n) * q.param_bytes;
  out.grads = (q.shard >= 2 ? sharded : n) * q.grad_bytes;
  out.optimizer = (q.shard >= 1 ? sharded : n) * q.optimizer_bytes;
  // 1F1B: the first stage holds the activations of min(pp, micro-batches) micro-batches.
  const int64_t in_flight = std::min<int64_t>(q.pp, q.micro_batches);
  out.activations = stage_layers * in_flight * layer_activation_bytes(q);
  return out;
}

}  // namespace gpulab::train::parallel
