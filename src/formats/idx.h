// IDX files (MNIST, Fashion-MNIST): a big-endian magic (0x0800 + dimensions for uint8 data), one
// big-endian uint32 per dimension, then the data; stored plain or gzipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::formats {

struct IdxArray {
  std::vector<int64_t> shape;
  std::string data;  // the product of shape bytes, C order
};

// Parses a file's bytes as stored, inflating gzip (recognised by its magic). The header's size
// is checked against the file before the data is allocated: a gzipped header that claims more
// than its compressed bytes can inflate to is refused unread. A bad file is one kDataError
// (kUnsupported for gzip in a build without zlib) saying what is wrong.
Result<IdxArray> parse_idx(std::string_view bytes, int dims);

}  // namespace gpulab::formats
