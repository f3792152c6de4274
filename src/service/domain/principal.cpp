// User names and the owner check of principal.h.
#include "service/domain/principal.h"

#include <cctype>

#include "service/base/api_error.h"

namespace gpulab::service {

bool valid_user_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || !std::isalnum(static_cast<unsigned char>(name[0])))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

void require_owner(const Principal& p, const std::string& owner, const std::string& what) {
  if (p.admin || p.user == owner) return;
  throw ApiError(ApiCode::kForbidden, what + " belongs to another user");
}

}  // namespace gpulab::service
