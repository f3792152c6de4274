// What every policy request (quotas, idle reclaim) shares: whose policy it sets, and its numeric
// fields, which may come as JSON numbers or as numeric strings ("0.5").
#pragma once

#include <string>

#include "core/json.h"

namespace gpulab::service {

// req["user"]: a valid user name, or "*" for everyone's default; INVALID_REQUEST otherwise.
std::string policy_request_user(const Json& req);

// A number or numeric string within lo..hi; INVALID_REQUEST naming the field (and the hint,
// when given) otherwise.
double policy_number(const Json& v, const char* name, double lo, double hi,
                     const std::string& hint = {});

}  // namespace gpulab::service
