// The training flags on a command line: train_option_rows() registered as CLI11 options, in
// table order.
#include "train_flags.h"

#include "base/flag_table.h"
#include "dataset_validator.h"

namespace gpulab::cli {

void add_train_flags(CLI::App* cmd, train::TrainOptions& o, const std::vector<std::string>& only) {
  for (CLI::Option* opt : add_option_rows(cmd, o, train::train_option_rows(), only))
    // --dataset's names live in the data module, which the options table does not know.
    if (opt->check_lname("dataset")) opt->check(dataset_validator());
}

}  // namespace gpulab::cli
