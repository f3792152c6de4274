// The optimizer's per-parameter tensors (Adam's moments, momentum) by parameter name, and states
// made from them, for a model-parallel run's checkpoints (mesh_checkpoint.h writes and reads
// them); and for reading an ordinary (one-process) checkpoint into such a run: the one-process
// model as a twin and an optimizer of the run's kind over it, read by train/checkpoint.h.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/models/causal_lm.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

using Moments = std::map<std::string, StateDict>;  // state field -> parameter name -> tensor

// The fields of a parameter's optimizer state shaped like the parameter (Adam's moments, SGD's
// and RMSprop's buffers), those that are defined. Throws kUnsupported for another optimizer.
std::vector<std::pair<std::string, torch::Tensor*>> moment_fields(
    torch::optim::OptimizerParamState& s);

// The step count of a parameter's state (Adam, AdamW, RMSprop); nullopt for SGD's.
std::optional<int64_t> state_step(const torch::optim::OptimizerParamState& s);

// A parameter's state for opt's kind: `step` steps taken and the fields `f` (moment_fields'
// names). Throws kDataError when a field is not one of the kind's (another --optimizer).
std::unique_ptr<torch::optim::OptimizerParamState> make_state(
    const torch::optim::Optimizer& opt, int64_t step,
    const std::map<std::string, torch::Tensor>& f);

// An optimizer of opt's kind with opt's defaults and group options, over `groups` (one per group
// of opt, in its order). Throws kUnsupported for a kind without a model-parallel checkpoint.
std::unique_ptr<torch::optim::Optimizer> same_kind_optimizer(
    const torch::optim::Optimizer& opt, std::vector<std::vector<torch::Tensor>> groups);

// The one-process model of shape `c` in `dtype`, without touching the RNG the checkpoint records
// (building initialises weights).
std::shared_ptr<CausalLm> ordinary_twin(const DecoderConfig& c, torch::ScalarType dtype);

// opt's state tensors of every parameter of `model` (those on the meta device have none), by
// field and name.
Moments state_moments(torch::nn::Module& model, const torch::optim::Optimizer& opt);

// For each parameter of `to_model` off the meta device and named in `moments`, with state in
// `from`: a copy of the state of the parameter of the same name in `from_model`, its tensors
// replaced by `moments` (already in to's layout).
void copy_state(torch::optim::Optimizer& from, torch::nn::Module& from_model,
                torch::optim::Optimizer& to, torch::nn::Module& to_model, const Moments& moments);

}  // namespace gpulab::train::parallel
