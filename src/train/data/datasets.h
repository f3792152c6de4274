// The data set factory: opens CIFAR-10/100 (Python pickle or binary), MNIST, Fashion-MNIST (IDX,
// gzipped or not), ImageFolder and the synthetic benchmark set by name, and checks the files
// before training starts (missing folder, truncated file, missing class) with a hint that says
// which `gpulab data get` command fetches them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "train/data/data_options.h"
#include "train/data/dataset.h"

namespace gpulab::train {

// Opens `name` (cifar10, cifar100, mnist, fashion-mnist / fashion_mnist, imagefolder, synthetic)
// under `data_dir`. Throws gpulab::Exception: kInvalidArgument for an unknown name or option,
// kNotFound for missing data (with a `gpulab data get` hint), kDataError for a corrupt file.
DatasetPtr open_dataset(std::string_view name, const std::string& data_dir, Split split,
                        const DatasetOptions& options = {});

// The canonical names open_dataset accepts, in the order help text lists them.
const std::vector<std::string>& dataset_names();
// Resolves aliases ("fashion_mnist" -> "fashion-mnist", "cifar-10" -> "cifar10"); empty if unknown.
std::string canonical_dataset_name(std::string_view name);

}  // namespace gpulab::train
