// Token checks against the store; tokens are compared by their SHA-256, never stored in clear.
#include "service/http/auth.h"

#include "service/base/api_error.h"
#include "service/base/config.h"
#include "service/base/crypto.h"

namespace gpulab::service {

Principal Auth::authenticate(const std::string& authorization) const {
  if (authorization.empty()) {
    if (required_)
      throw ApiError(ApiCode::kUnauthorized, "Missing API token",
                     "send the header 'Authorization: Bearer <token>'");
    // Anonymous = the local admin only while nobody else has objects to protect.
    if (!store_.users().empty())
      throw ApiError(ApiCode::kUnauthorized,
                     "Missing API token: this service has users, so requests need a token",
                     "send 'Authorization: Bearer <token>'; an admin issues one with "
                     "'gpulab serve --add-user NAME' or POST /api/v1/gpu-docker/users");
    return Principal{kLocalUser, true};
  }
  const std::string prefix = "Bearer ";
  if (authorization.compare(0, prefix.size(), prefix) != 0)
    throw ApiError(ApiCode::kUnauthorized, "Malformed Authorization header",
                   "send 'Authorization: Bearer <token>'");
  std::string token = authorization.substr(prefix.size());
  auto user = store_.user_for_token(sha256_hex(token));
  if (!user) throw ApiError(ApiCode::kUnauthorized, "Invalid API token");
  return Principal{user->name, user->admin};
}

std::string Auth::mode() const {
  if (required_) return "required";
  if (!store_.users().empty()) return "tokens (users exist: anonymous requests refused)";
  return "off (loopback; anonymous acts as admin until the first user is added)";
}

std::string Auth::issue_token(const std::string& user, bool admin) {
  if (!valid_user_name(user))
    throw ApiError(ApiCode::kInvalidRequest, "Invalid user name '" + user + "'",
                   "use 1-64 letters, digits, '_', '.', '-'");
  std::string token = "glt_" + random_secret(40);
  store_.transaction([&] {
    auto u = store_.find_user(user);
    std::int64_t id = u ? u->id : store_.add_user(user, admin);
    store_.add_token(id, sha256_hex(token));
  });
  return token;
}

void Auth::revoke_token(const std::string& token) {
  if (store_.revoke_token(sha256_hex(token)) == 0)
    throw ApiError(ApiCode::kNotFound, "No such token", "it may have been revoked already");
}

int Auth::revoke_user(const std::string& user) {
  auto u = store_.find_user(user);
  if (!u) throw ApiError(ApiCode::kNotFound, "User '" + user + "' not found");
  return store_.revoke_user_tokens(u->id);
}

void Auth::seed_users(const std::vector<UserSeed>& users) {
  for (const auto& s : users) {
    store_.transaction([&] {
      auto u = store_.find_user(s.name);
      std::int64_t id = u ? u->id : store_.add_user(s.name, s.admin);
      if (!store_.user_for_token(s.token_sha256)) store_.add_token(id, s.token_sha256);
    });
  }
}

}  // namespace gpulab::service
