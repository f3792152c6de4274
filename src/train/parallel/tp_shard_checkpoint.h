// Checkpoints of a tensor-parallel run sharded over its data-parallel ranks (--tp with --shard)
// in the ordinary layout, as every TP checkpoint is (tp_checkpoint.h): the flat shards'
// optimizer state is joined over the data-parallel group and cut into per-parameter state of
// this rank's TP shard, which save_tp_checkpoint gathers over the TP group; loading goes the
// other way. A run saved at TP 2 x DP 2 with ZeRO-3 resumes at TP 1, at any --shard, and back.
#pragma once

#include <torch/torch.h>

#include "train/checkpoint.h"
#include "train/dist/sharded_model.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/tp_causal_lm.h"

namespace gpulab::train::parallel {

// A mesh checkpoint (mesh_checkpoint.h). Collective over the whole mesh.
void save_tp_shard_checkpoint(const fs::path& dir, const TrainState& state, DeviceMesh& mesh,
                              TpCausalLm& model, dist::ShardedModel& sharded,
                              const torch::optim::Optimizer& opt, int keep);

// Every rank reads the checkpoint and takes its TP shard, then (once every rank of `world` read
// its part, agree_loaded) its data-parallel slice of each flat buffer (parameters and optimizer
// state); a file that does not load changes nothing.
Result<TrainState> load_tp_shard_checkpoint(const CheckpointInfo& ckpt, dist::Communicator& world,
                                            TpCausalLm& model, dist::ShardedModel& sharded,
                                            torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
