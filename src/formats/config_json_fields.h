// The checks every config.json dialect (decoder_dialects.h) makes of its fields: sizes that must
// be integers, optional fields of the wrong type, and values gpulab's modules do not compute.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/result.h"

namespace gpulab::formats {

// Required integer fields absent or not integers, comma-separated. Sizes must be integers: a
// float (or 1e300) would be cast, not read.
std::string missing_ints(const Json& j, std::initializer_list<const char*> fields);

// An optional field: absent or null means the default, any other wrong type is an error.
bool optional_bad(const Json& j, const char* f, bool ok_type);

bool is_number(const Json& j, const char* f);
bool is_bool(const Json& j, const char* f);

// A field whose value would make another model than the family's modules compute: refused rather
// than read as the default. `want` is the one value gpulab's modules implement.
Status only_value(const Json& j, const char* field, const Json& want, std::string_view what,
                  const char* hint);

}  // namespace gpulab::formats
