// gpulab serve as a library call: open the book, reconcile with the engine, register the routes,
// watch engine events, and serve HTTP until a signal.
#pragma once

#include <string>

#include "service/base/config.h"

namespace gpulab::service {

struct ServeOptions {
  std::string port_file;  // written with the bound port once listening (for scripts and tests)
};

// Returns when the server stops; throws gpulab::Exception for start-up failures.
void serve(const ServiceConfig& config, const ServeOptions& options);

// Creates a user (if needed) and a token in the book at config.db_path; returns the token.
std::string issue_token(const ServiceConfig& config, const std::string& user, bool admin);
// Offline: revokes a token (given in clear) or, with a user name, all of a user's tokens;
// returns how many were revoked (0 with a NOT_FOUND error thrown for an unknown one).
int revoke_tokens(const ServiceConfig& config, const std::string& token, const std::string& user);

// Registers every API route on `router`, bound to `s` (also used by the request fuzz target).
class Router;
struct Service;
void add_routes(Router& router, Service& s);
// Offline (the CLI's --set-quota / --set-idle-policy): applies "USER:key=value,..." to the book
// at config.db_path through the same checks as the API; returns the user's stored fields (JSON).
std::string set_policy_offline(const ServiceConfig& config, bool quota, const std::string& text);
// Offline: every stored quota and idle policy, as JSON.
std::string show_policies_offline(const ServiceConfig& config);

// The OpenAPI document of the full route table (no engine needed).
std::string openapi_json();

}  // namespace gpulab::service
