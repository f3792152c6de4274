// The checks of --tp and --pp on `gpulab train`, run before any rank starts (in the launching
// process): what the model's shape, the world size, the sequence length, the other options and
// the nodes allow, each refusal naming the numbers and a layout that works.
#pragma once

#include "core/result.h"
#include "train/train_options.h"

namespace gpulab::train::parallel {

// --pp above 1: check_pipeline_options (pipeline_options.h); with --tp above 1: a language model of
// a family with a tensor-parallel model, a TP size its heads, kv heads and FFN width allow, a world
// size it divides, a sequence it splits (sequence parallelism), and no option the TP model cannot
// honour (fp16, whose loss scaler decides per rank); both: each, and a family whose TP model builds
// a pipeline stage (tp_families.h). kInvalidArgument.
Status check_model_parallel_options(const TrainOptions& o, int world_size);

// --tp given as 1: the device mesh's degenerate case (the tensor-parallel model, every TP
// collective over a group of one; `make gpu-check` runs it on one GPU). Checked as a TP size
// above 1 is; --shard is refused (the one-rank mesh runs over plain data parallelism).
// kInvalidArgument.
Status check_tp_mesh_options(const TrainOptions& o, const std::string& shard, int world_size);

// A TP group stays inside a node (ranks are numbered node by node, TP innermost) unless
// --allow_tp_across_nodes (--shard, ZeRO over the data-parallel group, places nothing else).
// `ranks_per_node` and `nnodes` as the launcher will start them.
Status check_tp_placement(const TrainOptions& o, int ranks_per_node, int nnodes);

}  // namespace gpulab::train::parallel
