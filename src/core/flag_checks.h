// The checks of a command-line value that every options struct's validator shares, worded alike
// for every flag and command: "--nnodes 0 is outside 1..65536", "--momentum 1 is outside [0, 1)",
// "--backend 'x' is not valid".
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/strings.h"

namespace gpulab {

// A flag's range: closed unless an end is open; an infinite end is no bound. Written "lo..hi"
// when closed and bounded, else as an interval: "[1, inf)", "(0, 1]".
struct FlagRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;

  bool contains(double v) const {  // NaN is in no range
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string text() const {
    if (!lo_open && !hi_open && std::isfinite(lo) && std::isfinite(hi))
      return fmt::format("{}..{}", lo, hi);
    return fmt::format("{}{}, {}{}", lo_open || std::isinf(lo) ? "(" : "[", lo, hi,
                       hi_open || std::isinf(hi) ? ")" : "]");
  }
};

// The refusal of every range check: "--flag VALUE is outside RANGE".
template <typename T>
Status flag_within(const std::string& flag, T value, const FlagRange& range) {
  if (range.contains(static_cast<double>(value))) return ok_status();
  return Error{Code::kInvalidArgument,
               fmt::format("--{} {} is outside {}", flag, value, range.text())};
}

// A closed range: "--nnodes 0 is outside 1..65536".
template <typename T>
Status flag_in_range(const char* flag, T value, T lo, T hi) {
  return flag_within(flag, value, FlagRange{static_cast<double>(lo), static_cast<double>(hi)});
}

inline Status flag_one_of(const std::string& flag, const std::string& value,
                          const std::vector<std::string>& valid) {
  if (std::find(valid.begin(), valid.end(), value) != valid.end()) return ok_status();
  return Error{Code::kInvalidArgument, fmt::format("--{} '{}' is not valid", flag, value),
               "valid values: " + join(valid, ", ")};
}

}  // namespace gpulab
