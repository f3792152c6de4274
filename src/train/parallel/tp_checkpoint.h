// Checkpoints of a tensor-parallel run in the ordinary layout: the model and the optimizer's
// per-parameter state (Adam's moments, momentum) gathered over the TP group into the tensors a
// one-process run holds, written by rank 0 as an ordinary checkpoint; and read back at any TP
// size (one included) by sharding them again. A run saved at TP 2 resumes at TP 1 or TP 4.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "train/checkpoint.h"
#include "train/parallel/tp_causal_lm.h"

namespace gpulab::train::parallel {

// The fields of a parameter's optimizer state shaped like the parameter (Adam's moments, SGD's
// and RMSprop's buffers), those that are defined. Throws kUnsupported for another optimizer.
std::vector<std::pair<std::string, torch::Tensor*>> moment_fields(
    torch::optim::OptimizerParamState& s);

// An optimizer of opt's kind and group options over `params` (one list per group of opt).
std::unique_ptr<torch::optim::Optimizer> optimizer_like(
    const torch::optim::Optimizer& opt, std::vector<std::vector<torch::Tensor>> params);

// Collective (every rank gathers); `writer` (rank 0) writes. Throws what save_checkpoint throws.
void save_tp_checkpoint(const fs::path& dir, const TrainState& state, TpCausalLm& model,
                        const torch::optim::Optimizer& opt, int keep, bool writer);

// Every rank reads the ordinary checkpoint and takes its shard of the model and of the
// optimizer state; a file that does not load changes nothing.
Result<TrainState> load_tp_checkpoint(const CheckpointInfo& ckpt, TpCausalLm& model,
                                      torch::optim::Optimizer& opt);

}  // namespace gpulab::train::parallel
