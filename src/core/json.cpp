// Strict JSON parsing that reports malformed input as a tier-2 error rather than throwing.
#include "core/json.h"

namespace gpulab {

Result<Json> parse_json(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    return Error{Code::kInvalidArgument,
                 std::string("malformed ") + std::string(what) + ": " + e.what()};
  }
}

}  // namespace gpulab
