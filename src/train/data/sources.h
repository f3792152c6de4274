// The data-set sources behind open_dataset (one file each). Each checks its files when opened.
#pragma once

#include <string>

#include "train/data/data_options.h"
#include "train/data/dataset.h"

namespace gpulab::train {

// CIFAR-10 (`classes` 10) or CIFAR-100 (100): Python pickles or the binary version.
DatasetPtr open_cifar(int classes, const std::string& data_dir, Split split, bool coarse);
// Where the Debian package dataset-fashion-mnist keeps its files (empty if not installed).
std::string system_fashion_mnist_dir();
// MNIST or Fashion-MNIST IDX files (gzipped or not); `fashion` picks names and search paths.
DatasetPtr open_idx(bool fashion, const std::string& data_dir, Split split, bool use_system);
// ImageFolder: <data_dir>/<split>/<class>/<image>; JPEG and PNG, decoded on demand.
DatasetPtr open_image_folder(const std::string& data_dir, Split split, int64_t image_size);
// Deterministic random images for benchmarks.
DatasetPtr open_synthetic(const DatasetOptions& opts, Split split);

}  // namespace gpulab::train
