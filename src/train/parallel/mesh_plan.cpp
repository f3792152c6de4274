// mesh_plan: the layout search over TP x PP x DP x ZeRO and the recommendation's rules.
#include "train/parallel/mesh_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "core/error.h"
#include "train/parallel/mesh_layout.h"
#include "train/parallel/tp_llama_state.h"

namespace gpulab::train::parallel {

namespace {

// Sizes that divide n, ascending.
std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

std::string join_sizes(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

// TP sizes a layout may use: dividing the GPUs, inside a node, and the shape's heads.
std::vector<int> tp_sizes(const MeshPlanQuery& q) {
  const int nodes = (q.gpus + q.gpus_per_node - 1) / q.gpus_per_node;
  const int per_node = std::min(q.gpus, q.gpus_per_node);
  std::vector<int> out;
  for (int t : divisors(q.gpus))
    if ((tp_inside_node(t, per_node, nodes) || q.allow_tp_across_nodes) && tp_size_fits(q.model, t))
      out.push_back(t);
  return out;
}

// Refuses a --tp / --pp the GPUs, the nodes or the shape do not allow, naming what does.
void check_requested(const MeshPlanQuery& q, const std::vector<int>& tps) {
  // Only the node keeps it out: --allow_tp_across_nodes would let it in.
  const bool node_bound = q.tp > 0 && q.gpus % q.tp == 0 && tp_size_fits(q.model, q.tp);
  if (q.tp > 0 && std::find(tps.begin(), tps.end(), q.tp) == tps.end())
    throw Exception(
        Code::kInvalidArgument,
        fmt::format("--tp {} does not fit {} GPUs ({} a node) and {} ({} heads, {} "
                    "key/value heads, FFN {}): TP must divide the GPUs and a node's "
                    "GPUs, and the shape must split {} ways",
                    q.tp, q.gpus, q.gpus_per_node, q.model.name, q.model.num_heads,
                    q.model.num_kv_heads, q.model.intermediate_size, q.tp),
        "use --tp " + join_sizes(tps) + (node_bound ? " (or --allow_tp_across_nodes)" : ""));
  const int tp = q.tp > 0 ? q.tp : 1;
  std::vector<int> pps;
  for (int p : divisors(q.gpus / tp))
    if (p <= q.model.num_layers) pps.push_back(p);
  if (q.pp > 0 && std::find(pps.begin(), pps.end(), q.pp) == pps.end())
    throw Exception(Code::kInvalidArgument,
                    fmt::format("--pp {} does not fit: with TP {} on {} GPUs, PP must divide {} "
                                "and be at most the {} layers",
                                q.pp, tp, q.gpus, q.gpus / tp, q.model.num_layers),
                    "use --pp " + join_sizes(pps));
}

LayoutPlan plan_layout(const MeshPlanQuery& q, int tp, int pp, int shard) {
  LayoutPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = q.gpus / (tp * pp);
  p.shard = shard;
  MeshMemoryQuery m = q.base;
  m.tp = tp;
  m.pp = pp;
  m.dp = p.dp;
  m.shard = shard;
  m.micro_batches = std::max<int64_t>(m.micro_batches, pp);  // 1F1B fills the pipeline
  m.activation_model = ActivationModel::kGpulab;             // what gpulab's ranks keep
  auto variant = [&](bool sp, Recompute r) {
    m.sequence_parallel = sp;
    m.recompute = r;
    return mesh_memory(m);
  };
  p.tp_alone = variant(false, Recompute::kNone);
  p.sp = variant(tp > 1, Recompute::kNone);
  p.no_scores = variant(tp > 1, Recompute::kSelective);
  p.full = variant(tp > 1, Recompute::kFull);
  p.fit = p.no_scores.total() <= q.capacity_bytes ? FitLevel::kNone
          : p.full.total() <= q.capacity_bytes    ? FitLevel::kFull
                                                  : FitLevel::kNoFit;
  return p;
}

// ZeRO-3 whose data-parallel group spans nodes: every layer's parameters all-gathered over the
// network twice a step (the "ZeRO-3 alone ... across nodes").
bool zero3_across_nodes(const LayoutPlan& p, const MeshPlanQuery& q) {
  return p.shard == 3 && (p.dp - 1) * p.tp * p.pp >= q.gpus_per_node;
}

// Lower is better: the lightest recomputation, no ZeRO-3 across nodes, the smallest
// model-parallel size, fewer pipeline stages (a bubble), not ZeRO-3 (it moves 1.5x what DDP
// does), then the least memory (DDP, ZeRO-1 and ZeRO-2 move the same bytes: an all-reduce is a
// reduce-scatter and an all-gather).
auto rank_key(const LayoutPlan& p, const MeshPlanQuery& q) {
  return std::make_tuple(static_cast<int>(p.fit), zero3_across_nodes(p, q), p.tp * p.pp, p.pp,
                         p.shard == 3, p.held().total());
}

// A smaller model-parallel layout that fits but was passed over for its ZeRO-3 across nodes.
const LayoutPlan* passed_over(const LayoutPlan& p, const std::vector<LayoutPlan>& all,
                              const MeshPlanQuery& q) {
  for (const auto& o : all)
    if (o.fit <= p.fit && zero3_across_nodes(o, q) && o.tp * o.pp < p.tp * p.pp) return &o;
  return nullptr;
}

std::string reason_for(const LayoutPlan& p, const std::vector<LayoutPlan>& all,
                       const MeshPlanQuery& q) {
  const LayoutPlan* z3 = passed_over(p, all, q);
  std::string r = p.fit == FitLevel::kNone
                      ? "fits without recomputation (attention keeping no scores, as gpulab's "
                        "kernel and SDPA do)"
                      : "fits only with activation checkpointing (--activation_checkpointing); "
                        "no layout fits without recomputation";
  r += fmt::format("; the smallest model-parallel size TP·PP = {} that does{}", p.tp * p.pp,
                   z3 ? " without ZeRO-3 across nodes" : "");
  r += p.dp > 1
           ? fmt::format(", leaving {}-way data parallelism (one gradient exchange a step)", p.dp)
           : ", with no data parallelism left";
  if (p.tp > 1)
    r += fmt::format("; TP {} inside a node (its all-reduces run in every layer)", p.tp);
  if (p.pp > 1)
    r += fmt::format(
        "; PP {} for the rest (stages pass only activations; {} layers on the "
        "fullest stage, embedding and output layer counted)",
        p.pp, p.held().stage_layers);
  if (p.shard > 0)
    r += fmt::format("; ZeRO-{} over the {} data-parallel ranks{}", p.shard, p.dp,
                     p.shard < 3 ? " (the bytes DDP moves, less memory)" : "");
  if (z3)
    r += fmt::format(
        "; TP {} x PP {} x DP {} with ZeRO-3 also fits, but all-gathers every "
        "layer's parameters across nodes twice a step",
        z3->tp, z3->pp, z3->dp);
  return r;
}

}  // namespace

DecoderShape decoder_shape(const DecoderConfig& c) {
  return {.layers = c.num_layers,
          .hidden = c.hidden_size,
          .ffn = c.intermediate_size,
          .heads = c.num_heads,
          .kv_heads = c.num_kv_heads,
          .vocab = c.vocab_size,
          .head_dim = c.dim_per_head(),
          .gated_mlp = c.traits().gated_mlp,
          .biases = c.traits().biases,
          .qkv_biases = c.traits().qkv_biases,
          .norm_bias = c.traits().norm_bias,
          .positions = c.traits().rotary ? 0 : c.max_positions,
          .tied_embeddings = c.tie_word_embeddings};
}

bool tp_size_fits(const DecoderConfig& c, int tp) {
  if (tp == 1) return true;
  try {
    check_tp_layout(c, tp);
  } catch (const Exception& e) {
    // A family TP does not split yet (kUnsupported) is still planned by its shape.
    return e.code() != Code::kInvalidArgument;
  }
  return true;
}

std::vector<LayoutPlan> mesh_layouts(const MeshPlanQuery& q) {
  const std::vector<int> tps = tp_sizes(q);
  check_requested(q, tps);
  std::vector<LayoutPlan> out;
  for (int tp : tps) {
    if (q.tp > 0 && tp != q.tp) continue;
    for (int pp : divisors(q.gpus / tp)) {
      if (pp > q.model.num_layers || (q.pp > 0 && pp != q.pp)) continue;
      const int dp = q.gpus / (tp * pp);
      for (int shard = 0; shard <= (dp > 1 ? 3 : 0); ++shard)
        if (q.shard < 0 || q.shard == shard || dp == 1)
          out.push_back(plan_layout(q, tp, pp, shard));
    }
  }
  return out;
}

std::optional<Recommendation> recommend_layout(const std::vector<LayoutPlan>& layouts,
                                               const MeshPlanQuery& q) {
  std::optional<size_t> best;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (layouts[i].fit == FitLevel::kNoFit) continue;
    if (!best || rank_key(layouts[i], q) < rank_key(layouts[*best], q)) best = i;
  }
  if (!best) return std::nullopt;
  return Recommendation{*best, reason_for(layouts[*best], layouts, q)};
}

}  // namespace gpulab::train::parallel
