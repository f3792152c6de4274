// Strict reads of fields in untrusted JSON (config.json, meta.json): nlohmann's get<int64_t>
// casts whatever number it finds, and an out-of-range float cast is undefined behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/json.h"

namespace gpulab {

// The member `key` of object j as an int64; nullopt when absent or not an integer that fits
// (1.5, 1e300, 2^64 - 1).
std::optional<int64_t> json_int64(const Json& j, std::string_view key);

}  // namespace gpulab
