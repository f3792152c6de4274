// The options of `gpulab train` as rows of data: each flag's name, the TrainOptions field it
// sets, its help text and its check (allowed names or a range). The command line registers the
// rows (apps/gpulab/train/train_flags.cpp), validate() checks them, and the flags other commands
// share (--model, --device, --seed, --batch_size) take their row's name and help from here.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/flag_checks.h"
#include "core/result.h"
#include "train/train_options.h"

namespace gpulab::train {

struct TrainOptionRow {
  using Field = std::variant<std::string TrainOptions::*, int64_t TrainOptions::*,
                             double TrainOptions::*, bool TrainOptions::*>;
  const char* name;  // snake_case, without dashes: the one spelling of the flag
  Field field;       // a bool field is a flag without a value
  const char* help;
  const std::vector<std::string>& (*one_of)() = nullptr;  // a string's allowed values
  std::optional<FlagRange> range = std::nullopt;          // a number's allowed values
  bool show_default = true;                               // --help prints the default
  // The kebab-case twin a command accepted before the snake_case policy (bench parity's
  // --batch-size): kept for every command that takes the row.
  const char* alias = nullptr;
};

// Every row, in --help order.
const std::vector<TrainOptionRow>& train_option_rows();

// The row of a flag (without dashes); a name not in the table is a bug.
const TrainOptionRow& train_option_row(const std::string& name);

// Each row's check on the value it holds: "--optimizer 'x' is not valid" with the valid names,
// "--momentum 1 is outside [0, 1)".
Status check_option_rows(const TrainOptions& o);

}  // namespace gpulab::train
