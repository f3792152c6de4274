// JSON for all of gpulab: nlohmann::json under one name, plus strict parse with a clear error.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace gpulab {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses text as JSON; malformed input is an InvalidArgument error naming the byte offset.
Result<Json> parse_json(std::string_view text, std::string_view what = "JSON");

}  // namespace gpulab
