// Training checkpoints: model, optimizer, schedule position, loss scaler, epoch and step, RNG
// states, data order and the metric history, in one file written atomically (temp file, fsync,
// rename), followed by a manifest with its size and checksum. Only a checkpoint whose manifest
// exists and matches counts, so a kill at any moment never leaves one that resume would load.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/result.h"
#include "train/optim/loss_scaler.h"

namespace gpulab::train {

namespace fs = std::filesystem;

// Everything besides tensors that a resumed run needs to continue exactly.
struct TrainState {
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps completed
  // Micro-batches of epoch `epoch` already trained: 0 at an epoch boundary, more when a run was
  // stopped (Ctrl-C, SIGTERM) inside an epoch; a resumed run skips them.
  int64_t batches_done = 0;
  int64_t seed = 0;  // base seed; epoch e shuffles with seed + e (the data order)
  int64_t world_size = 1;
  LossScaler::State scaler{1.0, 0, 0};
  Json history = Json::array();   // per-epoch metric records so far
  Json options = Json::object();  // the run's options, for the record
};

// The loss scaler's state as both checkpoint layouts (one file, sharded) store it:
// {"scale", "good_steps", "skipped"}; a missing field reads as a fresh scaler's.
Json scaler_json(const LossScaler::State& s);
LossScaler::State scaler_from_json(const Json& j);

// The training state as the indexes of per-rank checkpoints (sharded, mesh) record it: epoch,
// step, batches_done, seed, world_size, scaler, history and options; a missing field reads as
// TrainState's default.
Json train_state_json(const TrainState& s);
TrainState train_state_from_json(const Json& j);

// "ckpt-eEEEE-sSSSSSSSS": the name every checkpoint file and manifest of a state starts with.
std::string checkpoint_stem(const TrainState& s);

struct CheckpointInfo {
  fs::path file;      // ckpt-eNNNN-sNNNNNNNN.pt
  fs::path manifest;  // same name, .json
  int64_t epoch = 0;
  int64_t step = 0;
};

// Writes a checkpoint into `dir` (created if needed) and then deletes complete checkpoints
// beyond the newest `keep`, plus leftovers of interrupted writes. Throws on I/O failure.
CheckpointInfo save_checkpoint(const fs::path& dir, const TrainState& state,
                               torch::nn::Module& model, const torch::optim::Optimizer& opt,
                               int keep);

// Complete checkpoints in `dir` (manifest present and well-formed), newest first. Checksums are
// checked by load_checkpoint, which skips to the next on mismatch via find_resumable.
std::vector<CheckpointInfo> list_checkpoints(const fs::path& dir);

// Removes a checkpoint: its manifest first (it stops counting at once), then the files it lists
// (a sharded or per-rank checkpoint's "shards"), then its file. Errors are ignored (retention).
void remove_checkpoint(const CheckpointInfo& ckpt);

// The newest checkpoint in `dir` whose bytes match its manifest; nullopt if none. With
// `older_than` (a manifest): the newest of those written before it (the one a resume falls back
// to when that one proves damaged as it is read).
std::optional<CheckpointInfo> find_resumable(const fs::path& dir, const fs::path& older_than = {});

// A checkpoint file given by path (or one rank's file of a per-rank checkpoint, or the
// manifest): its manifest must sit next to it and match.
Result<CheckpointInfo> checkpoint_at(const fs::path& file);

// Restores model, optimizer and RNG states; returns the rest. Fails (kDataError) on a checksum
// mismatch or unreadable file, changing nothing in that case.
Result<TrainState> load_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                   torch::optim::Optimizer& opt);

// A plain checkpoint's model tensors under the module's dotted names (module_state_dict's), and
// the run's options, read without building the model: what `gpulab export` turns into weights.
// Checked against the manifest first, like load_checkpoint.
struct CheckpointWeights {
  std::map<std::string, torch::Tensor> tensors;
  Json options = Json::object();
};
Result<CheckpointWeights> read_checkpoint_weights(const CheckpointInfo& ckpt);

// The checksum that new manifests and shard indexes record, with "checksum_algorithm":
// kChecksumAlgorithm (CRC-32, core/crc32.h), as 8 lowercase hex digits.
inline constexpr const char* kChecksumAlgorithm = "crc32";
std::string checksum_hex(std::string_view bytes);
std::string checksum_text(uint32_t crc);
// Whether `bytes` have the checksum `expected` under a manifest's `algorithm`: "crc32", or
// "fnv1a64" (FNV-1a 64-bit, 16 hex digits), which checkpoints written before session 42 carry.
bool checksum_matches(std::string_view bytes, const std::string& algorithm,
                      const std::string& expected);

}  // namespace gpulab::train
