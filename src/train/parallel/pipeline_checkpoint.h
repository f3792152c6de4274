// What a pipeline stage's rank needs to read its model whole: the stage's own parameters (the
// rest are on the meta device) and their optimizer groups, where they lie in the ordinary model
// (StageLayout), and checkpoints in the ordinary layout (the one-process model as a twin,
// ordinary_checkpoint.h), so any --pp (one included) and any --shard resumes them.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "train/checkpoint.h"
#include "train/models/causal_lm.h"
#include "train/parallel/tp_slices.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

// Where a stage's tensors meet the ordinary layout. The identities serve a stage of the ordinary
// model; a tensor-parallel stage takes its shard and says where its shards lie (TpStageLayout
// overrides them).
class StageLayout {
 public:
  virtual ~StageLayout() = default;
  // `whole`: the ordinary model's tensors, to this stage's own.
  virtual StateDict to_local(torch::nn::Module& /*model*/, const StateDict& whole) { return whole; }
  // Every tensor of the ordinary model (another stage's on the meta device): names, shapes and
  // dtypes.
  virtual StateDict ordinary_layout(torch::nn::Module& model) { return module_state_dict(model); }
  // Where this rank's tensor `name` lies in the ordinary one of shape `whole` (a stage of the
  // ordinary model holds its tensors whole).
  virtual TpSlices slices(torch::nn::Module& /*model*/, const std::string& /*name*/,
                          c10::IntArrayRef /*whole*/) {
    return whole_tensor();
  }
};

// The tensors `model` holds (parameters and buffers; another stage's are on the meta device).
StateDict held_state(torch::nn::Module& model);

// Whether `name` is the tied embedding's copy on pipeline stage `stage` after the first (the
// first stage's is the one counted, clipped and written).
bool is_tied_copy(const CausalLm& lm, int stage, const std::string& name);

// Whether this rank writes the pieces of `name` that `s` places (its checkpoint pieces, its
// slices of the optimizer state): not a copy another rank holds as well (a replicated tensor
// after its first holder, the tied embedding on a pipeline stage after the first).
bool writes_pieces(const CausalLm& lm, int stage, const TpSlices& s, const std::string& name);

// A box of an ordinary tensor that a rank holds, and the view of it in the rank's tensor.
struct HeldPiece {
  std::string name;
  Box box;
  torch::Tensor data;
};

// The pieces of `dict` (tensors of `model` by name: its parameters and buffers, or one optimizer
// moment each) that the rank at pipeline stage `stage` writes to a checkpoint or sends to the
// final weights: each tensor's boxes in the ordinary one (`ordinary`: its shapes), in name order,
// none of a copy another rank holds (a replicated tensor after its first holder, the tied
// embedding after the first stage, the vocabulary padding).
std::vector<HeldPiece> first_copy_pieces(torch::nn::Module& model, int stage, StageLayout& layout,
                                         const StateDict& ordinary, const StateDict& dict);

// The stage's model (a CausalLm with the other stages' pieces on the meta device).
const CausalLm& stage_model(const torch::nn::Module& model);

// The parameters this stage holds, by name, in the model's order.
std::vector<std::pair<std::string, torch::Tensor>> held_parameters(torch::nn::Module& model);

// make_optimizer's decay and no-decay groups over the parameters `model` holds, in its order:
// the stage's optimizer, and the ordinary twin's for checkpoints (as one process groups them).
std::vector<std::vector<torch::Tensor>> decay_groups(torch::nn::Module& model);

// An ordinary checkpoint into the stage, read whole: its parameters and opt's state of them (opt
// over the stage's parameters, as decay_groups groups them). A file that does not load changes
// nothing. (A mesh checkpoint, what pipeline runs write: load_stage_checkpoint.)
Result<TrainState> load_pipeline_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                            torch::optim::Optimizer& opt, StageLayout& layout);

}  // namespace gpulab::train::parallel
