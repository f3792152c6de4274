// Data-set error messages and hints (see source_errors.h).
#include "train/data/source_errors.h"

#include "core/error.h"

namespace gpulab::train {

std::string fetch_hint(const std::string& dataset, const std::string& data_dir) {
  if (dataset != "cifar10" && dataset != "cifar100" && dataset != "fashion-mnist") return {};
  std::string dir = data_dir.empty() ? "data" : data_dir;
  return "download it with: gpulab data get " + dataset + " --dir " + dir;
}

void throw_data_missing(const std::string& dataset, const std::string& data_dir,
                        const std::string& detail) {
  std::string hint = fetch_hint(dataset, data_dir);
  if (hint.empty()) hint = "check --data_dir";
  throw Exception(Code::kNotFound,
                  "Training data not found in " + (data_dir.empty() ? "." : data_dir) +
                      " directory (" + detail + ")",
                  hint);
}

void throw_data_corrupt(const std::string& dataset, const std::string& data_dir,
                        const std::filesystem::path& file, const std::string& detail) {
  std::string hint = fetch_hint(dataset, data_dir);
  hint = hint.empty() ? "replace the file" : "delete it and " + hint;
  throw Exception(Code::kDataError, file.string() + " is truncated or corrupt: " + detail, hint);
}

}  // namespace gpulab::train
