// Hugging Face's sharded weights: a model's tensors in several safetensors files
// (model-00001-of-00003.safetensors, ...) and model.safetensors.index.json mapping each tensor to
// its file, as save_pretrained writes a model larger than its max_shard_size and as every large
// model on the Hub ships. Read (every tensor mapped, the index checked against the files) and
// written (from a TensorStream, one tensor at a time).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train {

inline constexpr const char* kHfWeightsName = "model.safetensors";
inline constexpr const char* kHfIndexName = "model.safetensors.index.json";

// "50GB", "500MB", "2GiB", "1048576" -> bytes, as transformers reads max_shard_size: KB, MB, GB
// and TB are powers of 1000, KiB, MiB, GiB and TiB powers of 1024, a bare number bytes.
// kInvalidArgument, saying what it takes, for anything else or a size below 1 KB.
Result<uint64_t> parse_shard_size(std::string_view text);

// True for a path named like Hugging Face's index (…safetensors.index.json).
bool is_hf_index(const std::filesystem::path& path);
// The index beside a shard file that lists it; nullopt for a file no index there names.
std::optional<std::filesystem::path> hf_index_of_shard(const std::filesystem::path& shard);

// Every tensor of the files `index` names, mapped (nothing is read until touched). The index and
// the files must agree: a missing file, a tensor not in the file the index places it in, or a
// tensor in two files is a DataError naming them. Tensors a file holds beyond the index are read
// too, as transformers reads them.
Result<StateDict> read_hf_shards(const std::filesystem::path& index);

// The names of each file, in order: `layout`'s tensors in name order, a new file started where
// the next tensor would take the current one past `max_bytes` (a tensor larger than that alone).
std::vector<std::vector<std::string>> plan_shards(const StateDict& layout, uint64_t max_bytes);

// Writes the stream's tensors into `dir`: one model.safetensors where they fit in `max_bytes`,
// else the shards and then the index. Each file is written atomically, and stale weights of
// another layout (an earlier model.safetensors, index or shards) are removed, so that a reader
// never takes old and new tensors together. A failure still takes every tensor (model-parallel
// ranks send them). Returns the path readers open: model.safetensors or the index.
Result<std::filesystem::path> write_hf_weights(const std::filesystem::path& dir,
                                               TensorStream& stream,
                                               const std::map<std::string, std::string>& metadata,
                                               uint64_t max_bytes);

// The weights file of a Hugging Face folder: model.safetensors, else the index (the order
// transformers looks in); model.safetensors' path where there is neither.
std::filesystem::path hf_weights_path(const std::filesystem::path& dir);

}  // namespace gpulab::train
