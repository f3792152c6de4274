// The field checks of the config.json dialects (config_json_fields.h).
#include "formats/config_json_fields.h"

#include "core/json_fields.h"
#include "core/strings.h"

namespace gpulab::formats {

std::string missing_ints(const Json& j, std::initializer_list<const char*> fields) {
  std::string missing;
  for (const char* f : fields)
    if (!json_int64(j, f)) missing += (missing.empty() ? "" : ", ") + std::string(f);
  return missing;
}

bool optional_bad(const Json& j, const char* f, bool ok_type) {
  return j.contains(f) && !j[f].is_null() && !ok_type;
}

bool is_number(const Json& j, const char* f) {
  return j.contains(f) && j[f].is_number();
}

bool is_bool(const Json& j, const char* f) {
  return j.contains(f) && j[f].is_boolean();
}

Status only_value(const Json& j, const char* field, const Json& want, std::string_view what,
                  const char* hint) {
  if (!j.contains(field) || j[field].is_null() || j[field] == want) return ok_status();
  return Status(Code::kInvalidArgument,
                std::string(what) + ": " + field + " " + printable(j[field].dump()) +
                    " is not supported (only " + want.dump() + ")",
                hint);
}

}  // namespace gpulab::formats
