// Checkpoints of a tensor-parallel run in the ordinary layout: the model and the optimizer's
// per-parameter state (Adam's moments, momentum) gathered over the TP group into the tensors a
// one-process run holds, written by rank 0 as an ordinary checkpoint; and read back at any TP
// size (one included) by sharding them again. A run saved at TP 2 resumes at TP 1 or TP 4.
#pragma once

#include <torch/torch.h>

#include "train/checkpoint.h"
#include "train/parallel/tp_causal_lm.h"

namespace gpulab::train::parallel {

// Collective (every rank gathers); `writer` (rank 0) writes. Throws what save_checkpoint throws.
void save_tp_checkpoint(const fs::path& dir, const TrainState& state, TpCausalLm& model,
                        const torch::optim::Optimizer& opt, int keep, bool writer);

// Every rank reads the ordinary checkpoint and takes its shard of the model and of the
// optimizer state; a file that does not load changes nothing.
Result<TrainState> load_tp_checkpoint(const CheckpointInfo& ckpt, TpCausalLm& model,
                                      torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
