// The user and number checks of policy_request.h.
#include "service/ops/policies/policy_request.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/domain/principal.h"
#include "service/store/user_policy.h"

namespace gpulab::service {

std::string policy_request_user(const Json& req) {
  std::string user = req["user"].get<std::string>();
  if (user != kDefaultPolicyUser && !valid_user_name(user))
    throw ApiError(ApiCode::kInvalidRequest, "user: not a valid user name",
                   "1-64 of [A-Za-z0-9_.-], or \"*\" for the default");
  return user;
}

double policy_number(const Json& v, const char* name, double lo, double hi,
                     const std::string& hint) {
  std::optional<double> d;
  if (v.is_number())
    d = v.get<double>();
  else if (v.is_string())
    d = parse_double(v.get<std::string>());
  if (!d) throw ApiError(ApiCode::kInvalidRequest, std::string(name) + " must be a number", hint);
  if (!std::isfinite(*d) || *d < lo || *d > hi)
    throw ApiError(ApiCode::kInvalidRequest, fmt::format("{} must be {:g}..{:g}", name, lo, hi),
                   hint);
  return *d;
}

}  // namespace gpulab::service
