// Cookie sessions with CSRF tokens; ids are kept only as SHA-256, compared in constant time.
#include "service/http/web_session.h"

#include <openssl/crypto.h>

#include "service/base/api_error.h"
#include "service/base/crypto.h"

namespace gpulab::service {

WebSessions::Created WebSessions::create(const Principal& who, const std::string& token_sha256) {
  Created c{random_secret(32), random_secret(32)};
  std::lock_guard<std::mutex> lock(mu_);
  // Drop expired sessions now and then so the map cannot grow without bound.
  auto now = std::chrono::steady_clock::now();
  for (auto it = sessions_.begin(); it != sessions_.end();)
    it = now - it->second.last_seen > idle_limit_ ? sessions_.erase(it) : std::next(it);
  sessions_[sha256_hex(c.id)] = Entry{who, c.csrf, token_sha256, now};
  return c;
}

std::string WebSessions::cookie_value(const std::string& cookie_header, const std::string& name) {
  size_t pos = 0;
  while (pos < cookie_header.size()) {
    size_t end = cookie_header.find(';', pos);
    if (end == std::string::npos) end = cookie_header.size();
    std::string part = cookie_header.substr(pos, end - pos);
    size_t b = part.find_first_not_of(' ');
    if (b != std::string::npos) part = part.substr(b);
    size_t eq = part.find('=');
    if (eq != std::string::npos && part.substr(0, eq) == name) return part.substr(eq + 1);
    pos = end + 1;
  }
  return {};
}

WebSessions::Entry* WebSessions::find_locked(const std::string& cookie_header) {
  std::string id = cookie_value(cookie_header, kSessionCookie);
  if (id.empty()) return nullptr;
  auto it = sessions_.find(sha256_hex(id));
  if (it == sessions_.end()) return nullptr;
  auto now = std::chrono::steady_clock::now();
  if (now - it->second.last_seen > idle_limit_) {
    sessions_.erase(it);
    return nullptr;
  }
  it->second.last_seen = now;
  return &it->second;
}

std::optional<Principal> WebSessions::authenticate(const std::string& cookie_header, bool changes,
                                                   const std::string& csrf) {
  if (cookie_value(cookie_header, kSessionCookie).empty()) return std::nullopt;
  Entry e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry* found = find_locked(cookie_header);
    if (!found)
      throw ApiError(ApiCode::kUnauthorized, "Session ended or expired",
                     "sign in again with your API token");
    e = *found;
  }
  if (changes &&
      (csrf.size() != e.csrf.size() || CRYPTO_memcmp(csrf.data(), e.csrf.data(), csrf.size()) != 0))
    throw ApiError(ApiCode::kForbidden, "Missing or wrong CSRF token",
                   std::string("send the session's token in the ") + kCsrfHeader + " header");
  // A revoked token ends its sessions too; its user's admin flag is read fresh.
  auto user = store_.user_for_token(e.token_sha256);
  if (!user) {
    end(cookie_header);
    throw ApiError(ApiCode::kUnauthorized, "The token of this session was revoked",
                   "sign in again with a valid API token");
  }
  return Principal{user->name, user->admin};
}

std::string WebSessions::csrf_for(const std::string& cookie_header) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = find_locked(cookie_header);
  return e ? e->csrf : std::string();
}

bool WebSessions::alive(const std::string& cookie_header) {
  std::string hash;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry* e = find_locked(cookie_header);
    if (!e) return false;
    hash = e->token_sha256;
  }
  return store_.user_for_token(hash).has_value();
}

bool WebSessions::end(const std::string& cookie_header) {
  std::string id = cookie_value(cookie_header, kSessionCookie);
  if (id.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.erase(sha256_hex(id)) > 0;
}

std::string WebSessions::set_cookie(const std::string& id, bool secure) {
  // HttpOnly: scripts cannot read it; SameSite=Strict: other sites' pages cannot send it;
  // Secure: never sent over plain HTTP once the service speaks HTTPS.
  return std::string(kSessionCookie) + "=" + id + "; Path=/; HttpOnly; SameSite=Strict" +
         (secure ? "; Secure" : "");
}

std::string WebSessions::clear_cookie(bool secure) {
  return std::string(kSessionCookie) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" +
         (secure ? "; Secure" : "");
}

}  // namespace gpulab::service
