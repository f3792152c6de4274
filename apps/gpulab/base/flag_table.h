// A flag table: each flag of one options struct declared once, as a row (its name without
// dashes and the call that registers it), and registered whole or by name by every command that
// takes it. The training, launch and sharding flags are such tables.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpulab::cli {

template <class Options>
struct FlagRow {
  const char* name;
  CLI::Option* (*add)(CLI::App*, Options&);
};

// Registers the rows named in `only`, or every row when it is empty, in table order; returns
// the options made. A name not in the table is a bug (it would drop a flag without a word).
template <class Options>
std::vector<CLI::Option*> add_flag_rows(CLI::App* cmd, Options& o,
                                        const std::vector<FlagRow<Options>>& table,
                                        const std::vector<std::string>& only) {
  for (const std::string& name : only)
    GPULAB_ASSERT(std::any_of(table.begin(), table.end(),
                              [&](const FlagRow<Options>& r) { return name == r.name; }),
                  ("no such flag in the table: --" + name).c_str());
  std::vector<CLI::Option*> made;
  for (const auto& row : table)
    if (only.empty() || std::find(only.begin(), only.end(), row.name) != only.end())
      made.push_back(row.add(cmd, o));
  return made;
}

}  // namespace gpulab::cli
