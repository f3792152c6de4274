// Checkpoints of a tensor-parallel run sharded over its data-parallel ranks (--tp with --shard):
// mesh checkpoints (mesh_checkpoint.h) in which every rank writes its own slice of the flat
// shards' optimizer state as boxes of the ordinary tensors, and reads its slice back from any
// layout's pieces; an ordinary checkpoint is read through per-parameter state. A run saved at TP
// 2 x DP 2 with ZeRO-3 resumes at TP 1, at any --shard, and back.
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

// Every rank reads its TP shard of the parameters and its data-parallel slice of the optimizer
// state (once every rank of `world` read its part, agree_loaded, its slice of the parameters
// goes to the flat shards); a file that does not load changes nothing.
Result<TrainState> load_tp_shard_checkpoint(const CheckpointInfo& ckpt, dist::Communicator& world,
                                            TpCausalLm& model, dist::ShardedModel& sharded,
                                            torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
