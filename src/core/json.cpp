// Strict JSON parsing that reports malformed input as a tier-2 error rather than throwing.
#include "core/json.h"

namespace gpulab {

Result<Json> parse_json(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for 1e400
    return Error{Code::kInvalidArgument,
                 std::string("malformed ") + std::string(what) + ": " + e.what()};
  }
}

std::optional<int64_t> json_int64(const Json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(std::string(key));
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace gpulab
