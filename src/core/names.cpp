// The object name rule of names.h.
#include "core/names.h"

#include <cctype>

namespace gpulab {

bool valid_object_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxObjectNameLength) return false;
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char ch : name) {
    auto c = static_cast<unsigned char>(ch);
    if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

}  // namespace gpulab
