// Who is asking: API tokens ("Authorization: Bearer <token>"), stored only as SHA-256, each
// belonging to a user; admins see everything, users only their own containers.
#pragma once

#include <string>

#include "service/base/config.h"
#include "service/domain/principal.h"
#include "service/store/store.h"

namespace gpulab::service {

// The user name an unauthenticated request acts as when tokens are not required (loopback only).
inline constexpr const char* kLocalUser = "local";

class Auth {
 public:
  Auth(Store& store, bool required) : store_(store), required_(required) {}
  bool required() const { return required_; }
  // How anonymous requests are treated right now, for the start-up line.
  std::string mode() const;

  // From the Authorization header value ("" when absent). A wrong token is always refused; a
  // missing one when tokens are required or once any user exists (else the request acts as the
  // local admin: a single-user loopback service).
  Principal authenticate(const std::string& authorization) const;

  // Creates the user if needed and a new token for it; returns the token (shown once).
  std::string issue_token(const std::string& user, bool admin);

  // Revokes one token (given in clear; only its hash is looked up) -> NOT_FOUND if unknown.
  void revoke_token(const std::string& token);
  // Revokes every token of a user -> how many; NOT_FOUND for an unknown user.
  int revoke_user(const std::string& user);

  // Loads users from the config file (token hashes only).
  void seed_users(const std::vector<UserSeed>& users);

 private:
  Store& store_;
  bool required_;
};

}  // namespace gpulab::service
