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

}  // namespace gpulab
