// JSON for all of gpulab: nlohmann::json under one name, plus strict parse with a clear error.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string_view>

#include "core/result.h"

namespace gpulab {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses text as JSON; malformed input is an InvalidArgument error naming the byte offset.
Result<Json> parse_json(std::string_view text, std::string_view what = "JSON");

// The member `key` of object j as an int64; nullopt when absent or not an integer that fits
// (1.5, 1e300, 2^64 - 1). nlohmann's get<int64_t> would cast those, out-of-range floats with
// undefined behaviour, so readers of untrusted files go through this.
std::optional<int64_t> json_int64(const Json& j, std::string_view key);

}  // namespace gpulab
