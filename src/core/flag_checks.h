// The checks of a command-line value that every options struct's validator shares, worded alike
// for every flag and command: "--nnodes 0 is outside 1..65536", "--backend 'x' is not valid".
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/strings.h"

namespace gpulab {

template <typename T>
Status flag_in_range(const char* flag, T value, T lo, T hi) {
  if (value >= lo && value <= hi) return ok_status();
  return Error{Code::kInvalidArgument,
               fmt::format("--{} {} is outside {}..{}", flag, value, lo, hi)};
}

inline Status flag_one_of(const std::string& flag, const std::string& value,
                          const std::vector<std::string>& valid) {
  if (std::find(valid.begin(), valid.end(), value) != valid.end()) return ok_status();
  return Error{Code::kInvalidArgument, fmt::format("--{} '{}' is not valid", flag, value),
               "valid values: " + join(valid, ", ")};
}

}  // namespace gpulab
