// The wrap policy of sharded data parallel: which modules of a model become units (one flat
// buffer each, gathered and freed together). Generic over torch::nn::Module: it looks only at
// the module tree. A unit frees its parameters between uses only when the model runs it through
// run_unit() (train/unit_hooks.h); the others stay gathered, which is correct for any model.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace gpulab::train::dist {

struct WrapUnit {
  std::string name;  // the module's path in the model ("layer1", "layers.3")
  torch::nn::Module* module = nullptr;
};

// policy:
//   auto      the elements of a top-level ModuleList (transformer blocks), else the top-level
//             Sequential children (residual stages), else every top-level child with parameters
//   blocks    the elements of every top-level ModuleList or Sequential
//   children  every top-level child that holds parameters
//   none      no units: the whole model is one (the root)
// Parameters outside every unit form the root unit. Throws kInvalidArgument for another name.
std::vector<WrapUnit> choose_units(torch::nn::Module& model, const std::string& policy);

const std::vector<std::string>& wrap_policy_names();

}  // namespace gpulab::train::dist
