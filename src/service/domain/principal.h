// Who is asking, in the service's own terms: a user (admin or not), the rule that a user acts on
// their own objects only, and what a user name may be. The HTTP layer (http/auth.h) finds the
// principal of a request; operations only read it.
#pragma once

#include <string>

namespace gpulab::service {

struct Principal {
  std::string user;
  bool admin = false;
};

// Valid user names: 1-64 of [A-Za-z0-9_.-], starting alphanumeric.
bool valid_user_name(const std::string& name);

// Throws FORBIDDEN unless `p` owns `owner`'s objects (or is an admin).
void require_owner(const Principal& p, const std::string& owner, const std::string& what);

}  // namespace gpulab::service
