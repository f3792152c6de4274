// Reading a checkpoint into a tensor-parallel rank: a mesh checkpoint (mesh_checkpoint.h, what
// every TP run writes) through its pieces; an ordinary one (a one-process run's, or a TP run's
// before session 43) through an ordinary twin that is read whole and sharded. A run saved at
// TP 2 resumes at TP 1 or TP 4.
#pragma once

#include <torch/torch.h>

#include "train/checkpoint.h"
#include "train/parallel/tp_causal_lm.h"

namespace gpulab::train::parallel {

// Every rank reads the checkpoint and takes its shard of the model and of the optimizer state
// (no collective); a file that does not load changes nothing.
Result<TrainState> load_tp_checkpoint(const CheckpointInfo& ckpt, TpCausalLm& model,
                                      torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
