// TpStageLayout: a TP pipeline stage's shards and the ordinary layout (tp_stage_layout.h).
#include "train/parallel/tp_stage_layout.h"

#include "train/models/lm_families.h"
#include "train/parallel/tp_causal_lm.h"

namespace gpulab::train::parallel {

// Gathered over the TP group: every rank of a stage holds the same names.
// This rank's shard of the stage's tensors (the other stages' are left to them).
StateDict TpStageLayout::to_local(torch::nn::Module& model, const StateDict& whole) {
  StateDict stage;
  for (const auto& p : model.named_parameters())
    if (!p.value().is_meta() && whole.count(p.key())) stage[p.key()] = whole.at(p.key());
  return tp_model_of(model).shard(stage);
}

// The one-process model built wholly on the meta device: shapes without memory or a draw from
// the generator (nothing to initialise), in the stage's dtype.
StateDict TpStageLayout::ordinary_layout(torch::nn::Module& model) {
  const auto& lm = tp_model_of(model);
  ModelPart none;
  none.blocks.assign(static_cast<size_t>(lm.config().num_layers), false);
  none.embedding = none.head = false;
  auto shapes = build_causal_lm(lm.config(), torch::kCPU, none);
  for (const auto& p : model.named_parameters())
    if (!p.value().is_meta()) {
      shapes->to(p.value().scalar_type());
      break;
    }
  return module_state_dict(*shapes);
}

TpSlices TpStageLayout::slices(torch::nn::Module& model, const std::string& name,
                               c10::IntArrayRef whole) {
  return tp_model_of(model).slices_of(name, whole);
}

}  // namespace gpulab::train::parallel
