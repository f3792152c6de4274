// One batch file of CIFAR-10/100's Python version (a pickled dict holding a numpy uint8 N×3072
// "data" array and a label list), and the class names of its meta file, read without libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::formats {

inline constexpr int64_t kCifarPixels = 3 * 32 * 32;

struct CifarBatch {
  int64_t count = 0;
  std::string pixels;  // count × 3072 bytes, each image channel-major (3×32×32)
  std::vector<int64_t> labels;
};

// Parses a batch's bytes; labels come from `label_key` ("labels", "fine_labels", ...) and must
// lie in [0, num_classes). A bad file is one kDataError saying what is wrong.
Result<CifarBatch> parse_cifar_python_batch(std::string_view bytes, const char* label_key,
                                            int64_t num_classes);

// The names under `key` of a meta file; empty when the file is not such a pickle (the names are
// optional: a data set without them still trains).
std::vector<std::string> parse_cifar_label_names(std::string_view bytes, const char* key);

}  // namespace gpulab::formats
