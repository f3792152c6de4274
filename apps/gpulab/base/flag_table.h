// A flag table on a command line: the rows of an options struct (core/option_rows.h) registered
// as CLI11 options, whole or by name, by every command that takes them; a bool field becomes a
// flag without a value. The training and launch flags are such tables.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/option_rows.h"

namespace gpulab::cli {

// "--batch_size,--batch-size": the row's snake_case name and its kebab twin, if it has one.
template <class Options>
std::string flag_names(const OptionRow<Options>& row) {
  std::string names = std::string("--") + row.name;
  if (row.alias) names += std::string(",--") + row.alias;
  return names;
}

// Registers one row on `target`: its own field, or another struct's field of a type CLI11 reads
// (add_shared_flag). Values are checked by the struct's validator, not here.
template <class Options, class T>
CLI::Option* add_row_option(CLI::App* cmd, const OptionRow<Options>& row, T& target) {
  if constexpr (std::is_same_v<T, bool>) {
    return cmd->add_flag(flag_names(row), target, row.help);
  } else {
    CLI::Option* opt = cmd->add_option(flag_names(row), target, row.help);
    if (row.show_default) opt->capture_default_str();
    return opt;
  }
}

// Registers the rows named in `only`, or every row when it is empty, in table order; returns the
// options made. A name not in the table is a bug (it would drop a flag without a word).
template <class Options>
std::vector<CLI::Option*> add_option_rows(CLI::App* cmd, Options& o,
                                          const std::vector<OptionRow<Options>>& rows,
                                          const std::vector<std::string>& only) {
  for (const std::string& name : only) find_option_row(rows, name);
  std::vector<CLI::Option*> made;
  for (const auto& row : rows)
    if (only.empty() || std::find(only.begin(), only.end(), row.name) != only.end())
      made.push_back(
          std::visit([&](auto field) { return add_row_option(cmd, row, o.*field); }, row.field));
  return made;
}

}  // namespace gpulab::cli
