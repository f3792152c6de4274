// The flag table of train::TrainOptions: every flag of `gpulab train` that sets a training
// option, registered the same way by `gpulab bench train` for the subset it takes.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "train/train_options.h"

namespace gpulab::cli {

// Registers the flags named in `only` (without dashes, in table order), or all of them when it
// is empty. Values are checked by train::validate (check_train_options), not here, except
// --dataset, whose names only the data module knows.
void add_train_flags(CLI::App* cmd, train::TrainOptions& o,
                     const std::vector<std::string>& only = {});

}  // namespace gpulab::cli
