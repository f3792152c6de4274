// The safetensors container without the tensors: the 8-byte little-endian header length, the
// JSON header {name: {dtype, shape, data_offsets}} and where each tensor's bytes lie, all checked
// against the file's size before a caller allocates anything (train/weights builds the tensors).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::formats {

// The dtypes gpulab reads and writes, by their safetensors names, and their element sizes.
struct SafetensorsDtype {
  const char* name;
  int element_size;
};
inline constexpr SafetensorsDtype kSafetensorsDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of kSafetensorsDtypes
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within data (end - begin = numel * element size)
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;        // ordered by name
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" string map
  std::string_view data;                        // the bytes after the header (a view of input)
};

// Parses and checks the header of a whole file's bytes: every entry's dtype, shape (at most
// 2^40 elements) and offsets, each range inside the file, no two ranges overlapping. A bad file
// is one kDataError whose message says what is wrong, prefixed with `what` (usually the path).
Result<SafetensorsHeader> parse_safetensors_header(std::string_view bytes, std::string_view what);

}  // namespace gpulab::formats
