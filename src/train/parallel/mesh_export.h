// The final weights of a tensor- or pipeline-parallel run as a stream on world rank 0: for each
// ordinary tensor in name order, the ranks of the first data-parallel replica that hold a piece
// of it (the boxes their mesh checkpoint writes) send them, and rank 0 joins them as the file is
// written. No rank holds more than its share of the model and one tensor, where gathering the
// whole model on every rank could not export a 70B model.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "train/parallel/device_mesh.h"
#include "train/parallel/pipeline_checkpoint.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train::parallel {

// Collective over the mesh's world (creating it, and each take()). `model` is this rank's (a
// stage, a TP shard, both; every parameter present), `layout` where its tensors lie in the
// ordinary model. Rank 0's take() returns the ordinary tensor on the CPU.
std::unique_ptr<TensorStream> mesh_model_stream(DeviceMesh& mesh, torch::nn::Module& model,
                                                StageLayout& layout);

}  // namespace gpulab::train::parallel
