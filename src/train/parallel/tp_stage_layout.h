// Where a tensor-parallel pipeline stage's tensors meet the ordinary layout: where its TP shards
// lie in the one-process model's tensors, and its shard of them. Used by the TP x PP
// contexts (tp_pipeline_context.h, and with --shard tp_pipeline_shard_context.h) for checkpoints
// and the final weights.
#pragma once

#include "train/parallel/pipeline_checkpoint.h"

namespace gpulab::train::parallel {

class TpStageLayout : public StageLayout {
 public:
  // This rank's shard of the stage's tensors (the other stages' are left to them).
  StateDict to_local(torch::nn::Module& model, const StateDict& whole) override;
  // The one-process model built wholly on the meta device, in the stage's dtype.
  StateDict ordinary_layout(torch::nn::Module& model) override;
  // This rank's TP slices of the tensor.
  TpSlices slices(torch::nn::Module& model, const std::string& name,
                  c10::IntArrayRef whole) override;
};

}  // namespace gpulab::train::parallel
