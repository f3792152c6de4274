// The --dataset check shared by `gpulab train` and `gpulab bench train`: any name or alias the
// data module knows, else an error listing the valid ones.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "core/strings.h"
#include "train/data/datasets.h"
#include "train/lm_batches.h"

namespace gpulab {

inline CLI::Validator dataset_validator() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (!train::canonical_dataset_name(v).empty() || train::is_text_dataset(v)) return {};
        return "unknown dataset '" + v + "'; valid: " + join(train::dataset_names(), ", ");
      },
      "DATASET");
}

}  // namespace gpulab
