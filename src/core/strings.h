// Small string helpers used across modules: split, trim, join, case, number formatting.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpulab {

std::vector<std::string> split(std::string_view s, char sep, bool skip_empty = true);
std::string trim(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
// "1,234,567.89"-style grouping, as the seed prints GFLOPS.
std::string with_thousands(double value, int decimals);
// 1536 -> "1.50 KiB"; GB uses 1e9 when `decimal` is true (vendors quote memory that way).
std::string human_bytes(double bytes, bool decimal = false);

}  // namespace gpulab
