// ZeRO's optimizer state (per flat shard, train/dist/sharded_model.h) in the ordinary layout: each
// rank's slice of it as boxes of the ordinary tensors (what a model-parallel run sharded over its
// data-parallel ranks, --tp or --pp with --shard, writes and reads itself), and per-parameter
// state into the shards (reading an ordinary checkpoint).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "train/dist/sharded_model.h"
#include "train/parallel/flat_range.h"
#include "train/parallel/pipeline_checkpoint.h"

namespace gpulab::train::parallel {

// An optimizer of opt's kind and group options over the sharded model's parameters, each flat
// group's parameters in the group of opt that steps its shard; no state.
std::unique_ptr<torch::optim::Optimizer> per_parameter_optimizer(
    dist::ShardedModel& sharded, const torch::optim::Optimizer& opt);

// Where this rank's slice of each flat shard lies in the ordinary tensors (`ordinary`: their
// shapes; `stage`: this rank's pipeline stage): what it writes of the optimizer state to a mesh
// checkpoint and reads back (mesh_checkpoint.h), with no collective.
std::vector<FlatSlice> zero_slices(dist::ShardedModel& sharded, torch::nn::Module& model, int stage,
                                   StageLayout& layout, const StateDict& ordinary);

// The parameters' values (loaded in place, gathered) into this rank's shards.
void params_into_shards(dist::ShardedModel& sharded);

// The parameters' values into the shards, and `from`'s per-parameter state into opt's state of
// each shard (this rank's slice of it).
void flatten_state(dist::ShardedModel& sharded, torch::optim::Optimizer& from,
                   torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
