// The data set factory: opens CIFAR-10/100 (Python pickle or binary), MNIST, Fashion-MNIST (IDX,
// gzipped or not), ImageFolder and the synthetic benchmark set by name, and checks the files
// before training starts (missing folder, truncated file, missing class) with a hint that says
// which `gpulab data get` command fetches them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "train/data/dataset.h"

namespace gpulab::train {

enum class Split { kTrain, kTest };

// "train" or "test" ("val" is accepted for test); throws gpulab::Exception (kInvalidArgument).
Split parse_split(std::string_view text);
std::string_view split_name(Split split);

struct DatasetOptions {
  // CIFAR-100: "fine" (100 classes) or "coarse" (20 super-classes).
  std::string cifar100_labels = "fine";
  // ImageFolder: every image is decoded and resized (bilinear) to image_size × image_size, so
  // batches have one shape. Pass the model's input size to skip a second resize in the loader.
  int64_t image_size = 224;
  // Synthetic: deterministic from `seed`.
  int64_t synthetic_size = 1024;
  int64_t synthetic_classes = 10;
  std::vector<int64_t> synthetic_shape = {3, 32, 32};  // {C, H, W}
  uint64_t seed = 0;
  // Fashion-MNIST falls back to the Debian package dataset-fashion-mnist when data_dir lacks it.
  bool use_system_data = true;
};

// Opens `name` (cifar10, cifar100, mnist, fashion-mnist / fashion_mnist, imagefolder, synthetic)
// under `data_dir`. Throws gpulab::Exception: kInvalidArgument for an unknown name or option,
// kNotFound for missing data (with a `gpulab data get` hint), kDataError for a corrupt file.
DatasetPtr open_dataset(std::string_view name, const std::string& data_dir, Split split,
                        const DatasetOptions& options = {});

// The canonical names open_dataset accepts, in the order help text lists them.
const std::vector<std::string>& dataset_names();
// Resolves aliases ("fashion_mnist" -> "fashion-mnist", "cifar-10" -> "cifar10"); empty if unknown.
std::string canonical_dataset_name(std::string_view name);

// Where the Debian package dataset-fashion-mnist keeps its files (empty if not installed).
std::string system_fashion_mnist_dir();

}  // namespace gpulab::train
