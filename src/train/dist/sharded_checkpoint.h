// Sharded checkpoints: each rank writes its shard of every flat group (parameters and optimizer
// state) to its own file, atomically; rank 0 then writes one index (the manifest of
// checkpoint.h, so listing and --resume auto find it) naming every shard file with its size and
// checksum, the flat layout with the public parameter names, and the training state. Loading
// works at any world size: the shards are joined and split again (resharding). Damaged input
// (an index that does not match its shards, a truncated shard) fails with kDataError and
// changes nothing.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/result.h"
#include "train/checkpoint.h"
#include "train/dist/communicator.h"
#include "train/dist/sharded_model.h"

namespace gpulab::train::dist {

inline constexpr const char* kShardedFormat = "gpulab-sharded-1";

// Collective (every rank calls it). Returns the index on rank 0 (the manifest) and keeps the
// newest `keep` checkpoints of this format in `dir`.
CheckpointInfo save_sharded_checkpoint(const fs::path& dir, const TrainState& state,
                                       torch::nn::Module& model, ShardedModel& sharded,
                                       const torch::optim::Optimizer& opt, int keep);

// All ranks' files or none, after each rank tried to write its own (`file`, empty for a rank that
// writes none; `written`, its `bytes` and their `crc`): one all-reduce gives every rank each
// rank's size, checksum and success, one row each ([world, 3]). When any rank could not write
// (a full disk), every rank removes its file and throws, so no file outlives a missing index and
// no rank waits in a collective for one that gave up. Collective.
torch::Tensor agree_all_written(Communicator& comm, const fs::path& file, const Status& written,
                                int64_t bytes, uint32_t crc, const std::string& name);

// The index of a per-rank checkpoint (sharded, or tensor/pipeline-parallel pieces): the training
// state, its `format`, each of `files` (in the checkpoint's folder) with the size and checksum
// agree_all_written gave it (row r for files[r]), the first named as the manifest's "file".
// Callers add their layout's fields.
Json per_rank_index(const TrainState& s, const char* format, const std::vector<std::string>& files,
                    const torch::Tensor& sums);

// Writes the index atomically; when it cannot be written, removes `files` (without the index
// none counts) and throws.
void write_index(const fs::path& manifest, const Json& index,
                 const std::vector<std::string>& files);

// Whether a manifest belongs to a sharded checkpoint.
bool is_sharded_checkpoint(const CheckpointInfo& ckpt);

// Collective. Restores this rank's shards (resharded to this world size), its optimizer state
// and the parameters; every check happens before anything changes.
Result<TrainState> load_sharded_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                           ShardedModel& sharded, torch::optim::Optimizer& opt);

// Joins every shard of a sharded checkpoint into full tensors under the model's public names
// (what `gpulab export` writes as one safetensors file). No process group needed.
Result<std::map<std::string, torch::Tensor>> consolidate_sharded_checkpoint(const fs::path& index);

}  // namespace gpulab::train::dist
