// An options struct's flags as rows of data: each flag's name, the field it sets, its help text
// and its check (allowed names or a range). A command line registers the rows
// (apps/gpulab/base/flag_table.h) and the struct's validator checks them, so a flag is declared
// once and refused the same way everywhere ("--momentum 1 is outside [0, 1)").
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/flag_checks.h"
#include "core/result.h"

namespace gpulab {

template <class Options>
struct OptionRow {
  using Field = std::variant<std::string Options::*, int64_t Options::*, int Options::*,
                             double Options::*, bool Options::*>;
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

// The row of a flag (without dashes); a name not in the table is a bug.
template <class Options>
const OptionRow<Options>& find_option_row(const std::vector<OptionRow<Options>>& rows,
                                          const std::string& name) {
  auto it = std::find_if(rows.begin(), rows.end(),
                         [&](const OptionRow<Options>& r) { return name == r.name; });
  GPULAB_ASSERT(it != rows.end(), ("no such flag in the table: --" + name).c_str());
  return *it;
}

// Each row's check on the value it holds, in table order; the first failure.
template <class Options>
Status check_option_rows(const Options& o, const std::vector<OptionRow<Options>>& rows) {
  for (const OptionRow<Options>& row : rows) {
    Status st = std::visit(
        [&](auto field) -> Status {
          const auto& value = o.*field;
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::string>) {
            if (row.one_of) return flag_one_of(row.name, value, row.one_of());
          } else if constexpr (!std::is_same_v<T, bool>) {
            if (row.range) return flag_within(row.name, value, *row.range);
          }
          return ok_status();
        },
        row.field);
    if (!st) return st;
  }
  return ok_status();
}

}  // namespace gpulab
