// Strict field reads of untrusted JSON (see json_fields.h).
#include "core/json_fields.h"

#include <string>

namespace gpulab {

std::optional<int64_t> json_int64(const Json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(std::string(key));
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace gpulab
