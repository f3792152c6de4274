// The options of `gpulab train` as rows of data: each flag's name, the TrainOptions field it
// sets, its help text and its check (allowed names or a range). The command line registers the
// rows (apps/gpulab/train/train_flags.cpp), validate() checks them, and the flags other commands
// share (--model, --device, --seed, --batch_size) take their row's name and help from here.
#pragma once

#include <string>
#include <vector>

#include "core/option_rows.h"
#include "core/result.h"
#include "train/train_options.h"

namespace gpulab::train {

using TrainOptionRow = OptionRow<TrainOptions>;

// Every row, in --help order.
const std::vector<TrainOptionRow>& train_option_rows();

// The row of a flag (without dashes); a name not in the table is a bug.
const TrainOptionRow& train_option_row(const std::string& name);

}  // namespace gpulab::train
