// The training flags on a command line: each row of train_option_rows() registered as a CLI11
// option (a bool field as a flag without a value), in table order.
#include "train_flags.h"

#include <algorithm>
#include <type_traits>
#include <variant>

#include "core/error.h"
#include "dataset_validator.h"

namespace gpulab::cli {

namespace {

using train::TrainOptionRow;

CLI::Option* add_train_row(CLI::App* cmd, const TrainOptionRow& row, train::TrainOptions& o) {
  return std::visit(
      [&](auto field) -> CLI::Option* {
        auto& value = o.*field;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
          return cmd->add_flag(flag_names(row), value, row.help);
        } else {
          CLI::Option* opt = cmd->add_option(flag_names(row), value, row.help);
          // --dataset's names live in the data module, which the options table does not know.
          if (std::string(row.name) == "dataset") opt->check(dataset_validator());
          if (row.show_default) opt->capture_default_str();
          return opt;
        }
      },
      row.field);
}

}  // namespace

std::string flag_names(const TrainOptionRow& row) {
  std::string names = std::string("--") + row.name;
  if (row.alias) names += std::string(",--") + row.alias;
  return names;
}

void add_train_flags(CLI::App* cmd, train::TrainOptions& o, const std::vector<std::string>& only) {
  const auto& rows = train::train_option_rows();
  // A name not in the table is a bug (it would drop a flag without a word).
  for (const std::string& name : only) train::train_option_row(name);
  for (const TrainOptionRow& row : rows)
    if (only.empty() || std::find(only.begin(), only.end(), row.name) != only.end())
      add_train_row(cmd, row, o);
}

}  // namespace gpulab::cli
