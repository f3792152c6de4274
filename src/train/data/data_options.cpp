// The split names of data_options.h.
#include "train/data/data_options.h"

#include "core/error.h"
#include "core/strings.h"

namespace gpulab::train {

Split parse_split(std::string_view text) {
  const std::string t = to_lower(text);
  if (t == "train") return Split::kTrain;
  if (t == "test" || t == "val") return Split::kTest;
  throw Exception(Code::kInvalidArgument, "unknown split '" + std::string(text) + "'",
                  "use train or test");
}

std::string_view split_name(Split split) {
  return split == Split::kTrain ? "train" : "test";
}

}  // namespace gpulab::train
