// safetensors read and write (our own small implementation): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}}, then the raw little-endian data.
// Also the strict state-dict load that checks names, shapes and dtypes against a module.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpulab::train {

// Name -> tensor, ordered by name (as the file's JSON header lists them).
using StateDict = std::map<std::string, torch::Tensor>;

struct SafetensorsFile {
  StateDict tensors;
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" string map
};

// Parses a whole file's bytes. Truncated or malformed input is a DataError whose one-line
// message says what is wrong, prefixed with `what` (usually the path).
Result<SafetensorsFile> parse_safetensors(std::string_view bytes, std::string_view what);
Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path);

// Serialises tensors (any device; copied to CPU, made contiguous). Dtypes: F64, F32, F16, BF16,
// I64, I32, I16, I8, U8, BOOL. Anything else is an InvalidArgument error.
Result<std::string> serialize_safetensors(const StateDict& tensors,
                                          const std::map<std::string, std::string>& metadata = {});
// Writes atomically (temp file, fsync, rename): a reader never sees half a file. With `crc`: the
// CRC-32 (core/crc32.h) of every byte written, computed as they are.
Status write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                         const std::map<std::string, std::string>& metadata = {},
                         uint32_t* crc = nullptr);

// A module's parameters and buffers under torchvision's dotted names, detached.
StateDict module_state_dict(const torch::nn::Module& module);

// Copies `weights` into the module's parameters and buffers. Strict: any missing, unexpected,
// wrongly shaped or wrongly typed (integer vs floating) entry fails the whole load, and the
// module is left unchanged; the error lists the names. Floating dtypes convert to the module's.
Status load_state_dict(torch::nn::Module& module, const StateDict& weights,
                       std::string_view what = "weights");

// "F32", "BF16", ...; empty for a dtype safetensors cannot hold.
std::string safetensors_dtype_name(torch::ScalarType type);

}  // namespace gpulab::train
