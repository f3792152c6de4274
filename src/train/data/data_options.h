// What a data set is opened with: the split, and the options of each source (CIFAR-100 labels,
// ImageFolder size, the synthetic set's shape, the system data fallback).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace gpulab::train
