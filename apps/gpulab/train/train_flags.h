// The flags of train::TrainOptions on a command line: every flag of `gpulab train` that sets a
// training option, registered from its row (train/train_option_rows.h) by `gpulab train`,
// `bench train` and `plan`, and the shared rows (--model, --device, --seed, --batch_size) that
// other commands register on their own fields with the same name, spelling and help.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "base/flag_table.h"
#include "train/train_option_rows.h"
#include "train/train_options.h"

namespace gpulab::cli {

// Registers the flags named in `only` (without dashes, in table order), or all of them when it
// is empty. Values are checked by train::validate (check_train_options), not here, except
// --dataset, whose names only the data module knows.
void add_train_flags(CLI::App* cmd, train::TrainOptions& o,
                     const std::vector<std::string>& only = {});

// Registers the training row `name` on another command's field (bench parity's --batch_size,
// generate's --seed): one declaration and one help text for a flag many commands take. The
// command checks the value itself (its range may be narrower than training's).
template <class T>
CLI::Option* add_shared_flag(CLI::App* cmd, const std::string& name, T& target) {
  return add_row_option(cmd, train::train_option_row(name), target);
}

}  // namespace gpulab::cli
