// ZeRO's optimizer state (per flat shard, train/dist/sharded_model.h) as the per-parameter state
// of the ordinary layout and back: how a model-parallel run sharded over its data-parallel ranks
// (--tp or --pp with --shard) writes and reads its checkpoints in the ordinary layout.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "train/dist/sharded_model.h"

namespace gpulab::train::parallel {

// An optimizer of opt's kind and group options over the sharded model's parameters, each flat
// group's parameters in the group of opt that steps its shard; no state.
std::unique_ptr<torch::optim::Optimizer> per_parameter_optimizer(
    dist::ShardedModel& sharded, const torch::optim::Optimizer& opt);

// opt's state of each flat shard, joined over the data-parallel group and cut into the state of
// each of its parameters in `into`, on the CPU: one flat group's state at a time is whole on the
// device (a 70B model's TP/PP piece holds tens of GB of moments, more than a GPU has spare).
// Collective over the data-parallel group (its ranks hold state for the same groups); only a
// rank that `keep`s it (the one that writes the checkpoint) fills `into`.
void unflatten_state(dist::ShardedModel& sharded, torch::optim::Optimizer& opt,
                     torch::optim::Optimizer& into, bool keep);

// The parameters' values into the shards, and `from`'s per-parameter state into opt's state of
// each shard (this rank's slice of it).
void flatten_state(dist::ShardedModel& sharded, torch::optim::Optimizer& from,
                   torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
