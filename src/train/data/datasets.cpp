// open_dataset: the one table of data-set names and aliases, dispatching to each source.
#include "train/data/datasets.h"

#include "core/error.h"
#include "core/strings.h"
#include "train/data/sources.h"

namespace gpulab::train {

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"cifar10",       "cifar100",    "mnist",
                                                 "fashion-mnist", "imagefolder", "synthetic"};
  return names;
}

std::string canonical_dataset_name(std::string_view name) {
  std::string n = to_lower(name);
  for (char& c : n)
    if (c == '_') c = '-';
  if (n == "cifar-10") return "cifar10";
  if (n == "cifar-100") return "cifar100";
  if (n == "fashionmnist") return "fashion-mnist";
  if (n == "image-folder") return "imagefolder";
  for (const auto& known : dataset_names())
    if (n == known) return known;
  return {};
}

DatasetPtr open_dataset(std::string_view name, const std::string& data_dir, Split split,
                        const DatasetOptions& options) {
  const std::string n = canonical_dataset_name(name);
  if (n.empty())
    throw Exception(Code::kInvalidArgument, "unknown dataset '" + std::string(name) + "'",
                    "choose one of: " + join(dataset_names(), ", "));
  if (n == "cifar10") return open_cifar(10, data_dir, split, false);
  if (n == "cifar100") {
    const std::string labels = to_lower(options.cifar100_labels);
    if (labels != "fine" && labels != "coarse")
      throw Exception(Code::kInvalidArgument,
                      "unknown CIFAR-100 label set '" + options.cifar100_labels + "'",
                      "use fine (100 classes) or coarse (20)");
    return open_cifar(100, data_dir, split, labels == "coarse");
  }
  if (n == "mnist") return open_idx(false, data_dir, split, false);
  if (n == "fashion-mnist") return open_idx(true, data_dir, split, options.use_system_data);
  if (n == "imagefolder") return open_image_folder(data_dir, split, options.image_size);
  return open_synthetic(options, split);
}

}  // namespace gpulab::train
