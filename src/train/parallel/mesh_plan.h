// The layouts a decoder can train in on N GPUs (every TP x PP x DP with a ZeRO stage over DP, TP
// inside a node), each rank's memory from mesh_memory, whether it fits a GPU, and the layout to
// use with the reason (Megatron-LM's rules: the smallest model-parallel size that fits, TP inside
// a node before pipeline stages, no ZeRO-3 all-gathers across nodes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/models/decoder_config.h"
#include "train/parallel/mesh_memory.h"

namespace gpulab::train::parallel {

// The shape mesh_memory reads, from a decoder's config (its matrices, heads, vocabulary, ties).
DecoderShape decoder_shape(const DecoderConfig& c);

struct MeshPlanQuery {
  DecoderConfig model;
  int gpus = 1;
  int gpus_per_node = 8;
  int64_t capacity_bytes = 0;  // one GPU's memory
  // Sequence, micro-batch, micro-batches per step and element sizes (tp, pp, dp, shard and the
  // activation options are the plan's own).
  MeshMemoryQuery base;
  int tp = 0;                          // only this TP size (0: every size that fits)
  int pp = 0;                          // only this PP size (0: every size)
  int shard = -1;                      // only this ZeRO stage (-1: every stage)
  bool allow_tp_across_nodes = false;  // TP sizes past a node's GPUs too
};

// How much recomputation a layout needs to fit: none, full (activation checkpointing, each
// block's input kept), or it does not fit even then.
enum class FitLevel { kNone, kFull, kNoFit };

struct LayoutPlan {
  int tp = 1, pp = 1, dp = 1, shard = 0;
  // The rank that holds the most under each activation variant: TP alone, + sequence
  // parallelism (sequence_parallel when tp > 1), + attention that keeps no scores (Korthikanti's
  // selective recomputation; what gpulab's attention does, so the fit without recomputation uses
  // it), full recomputation (activation checkpointing).
  MeshMemory tp_alone, sp, no_scores, full;
  FitLevel fit = FitLevel::kNoFit;
  // At the fit level: no_scores, or full (also when it does not fit at all).
  const MeshMemory& held() const { return fit == FitLevel::kNone ? no_scores : full; }
};

// TP sizes the model's heads, kv heads and FFN width split into (check_tp_layout's rule).
bool tp_size_fits(const DecoderConfig& c, int tp);

// Every layout the GPUs and the shape allow (tp·pp divides gpus, tp divides a node's GPUs,
// pp <= layers), fitting or not, in order of tp, pp, shard. Throws gpulab::Exception
// (kInvalidArgument) when q.tp / q.pp name none, naming the sizes that would work.
std::vector<LayoutPlan> mesh_layouts(const MeshPlanQuery& q);

struct Recommendation {
  size_t index = 0;  // into the layouts
  std::string reason;
};
// The layout to use among those that fit, and why; none when nothing fits.
std::optional<Recommendation> recommend_layout(const std::vector<LayoutPlan>& layouts,
                                               const MeshPlanQuery& q);

}  // namespace gpulab::train::parallel
