// Checkpoints of a tensor- or pipeline-parallel run written where the model lies (as torch's
// distributed checkpoint does): each rank of the first data-parallel replica writes its own
// pieces of the parameters, buffers and optimizer moments, each piece a box of the ordinary
// (Hugging Face) tensor it belongs to, so nothing is gathered and no rank holds more than its
// share (what a 70B model needs). World rank 0 then writes the index, the manifest of
// checkpoint.h: every file with its size and CRC-32, the ordinary tensors' shapes, the training
// state and the RNG. Any layout reads it: each rank takes the boxes its own pieces overlap from
// the mapped files, so a run saved at TP 2 x PP 2 resumes at one process, TP 4 or PP 1, and
// `gpulab export` joins the pieces into the ordinary tensors. Damaged or incomplete input fails
// with kDataError before anything changes.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "core/result.h"
#include "train/checkpoint.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/flat_range.h"
#include "train/parallel/pipeline_checkpoint.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train::parallel {

inline constexpr const char* kMeshFormat = "gpulab-mesh-1";

// Whether a manifest is a mesh checkpoint's index.
bool is_mesh_checkpoint(const CheckpointInfo& ckpt);

// Collective over the mesh's world. `model` is this rank's (a stage, a TP shard, both), `opt` a
// per-parameter optimizer over the tensors it holds, `layout` where they lie in the ordinary
// model. Throws on I/O failure, leaving the previous checkpoint the newest.
void save_mesh_checkpoint(const fs::path& dir, const TrainState& state, DeviceMesh& mesh,
                          torch::nn::Module& model, const torch::optim::Optimizer& opt, int keep,
                          StageLayout& layout);

// --shard over the data-parallel ranks of the mesh: every rank writes a file, those of the first
// replica their parameters and buffers, each rank its own slice of opt's state of its flat shards
// (`slices`, zero_state.h), so no moment is joined, sent or held beyond the slice. The same
// format: any layout reads it. Collective over the mesh's world.
void save_sharded_mesh_checkpoint(const fs::path& dir, const TrainState& state, DeviceMesh& mesh,
                                  torch::nn::Module& model, const torch::optim::Optimizer& opt,
                                  const std::vector<FlatSlice>& slices, int keep,
                                  StageLayout& layout);

// This rank's tensors and opt's state of them (a fresh per-parameter optimizer over the tensors
// `model` holds), from a mesh checkpoint of any layout; `layout` says where they lie (the base
// StageLayout: a whole model). Every rank reads on its own (no collective). Every check (the
// files' sizes and checksums, the shapes, every piece present) comes before any change.
Result<TrainState> load_mesh_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                        torch::optim::Optimizer& opt, StageLayout& layout);

// This rank's tensors, as load_mesh_checkpoint, and opt's state of each of `slices`' flat
// shards from the stored pieces its parts overlap (a mesh checkpoint of any layout, sharded or
// not): no rank reads or holds more than its slice. No collective.
Result<TrainState> load_sharded_mesh_checkpoint(const CheckpointInfo& ckpt,
                                                torch::nn::Module& model,
                                                torch::optim::Optimizer& opt,
                                                const std::vector<FlatSlice>& slices,
                                                StageLayout& layout);

// A checkpoint into a pipeline stage's rank (`layout` as above): a mesh checkpoint's pieces, or
// an ordinary checkpoint read whole (load_pipeline_checkpoint).
Result<TrainState> load_stage_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                         torch::optim::Optimizer& opt, StageLayout& layout);

// Whether every rank of `world` read its part of a checkpoint (`mine`, this rank's outcome): a
// rank that failed keeps its error; the others get the first failed rank's, so no rank trains on
// (or waits in a collective for a rank that stopped) after a partial resume. Collective.
Result<TrainState> agree_loaded(dist::Communicator& world, Result<TrainState> mine);

// The ordinary model's tensors joined from the pieces one at a time as they are taken (what
// `gpulab export` writes: it holds one tensor, not the model), read through the mapped files,
// every file's checksum checked first. No process group needed.
Result<std::unique_ptr<TensorStream>> mesh_checkpoint_stream(const fs::path& index);
// The same, every tensor at once.
Result<StateDict> consolidate_mesh_checkpoint(const fs::path& index);

}  // namespace gpulab::train::parallel
