// Dashboard sign-in: a session cookie made from an API token, and a CSRF token that every request
// changing something must echo in a header. Sessions live in memory (a restart signs everyone
// out) and end on sign-out, when their token is revoked, or after idle_limit without a request.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "service/http/auth.h"
#include "service/store/store.h"

namespace gpulab::service {

inline constexpr const char* kSessionCookie = "gpulab_session";
inline constexpr const char* kCsrfHeader = "X-CSRF-Token";

class WebSessions {
 public:
  explicit WebSessions(Store& store, std::chrono::seconds idle_limit = std::chrono::hours(12))
      : store_(store), idle_limit_(idle_limit) {}

  struct Created {
    std::string id;    // goes into the cookie (HttpOnly: page scripts never see it)
    std::string csrf;  // given to the page, sent back as the X-CSRF-Token header
  };
  // A session for `who`, signed in with the token whose hash is token_sha256.
  Created create(const Principal& who, const std::string& token_sha256);

  // The principal of the session named by a Cookie header; nullopt when the header names none.
  // Throws UNAUTHORIZED for an unknown, ended or expired session, or a revoked token, and
  // FORBIDDEN when `changes` (not GET/HEAD) and `csrf` is not the session's token.
  std::optional<Principal> authenticate(const std::string& cookie_header, bool changes,
                                        const std::string& csrf);
  // The CSRF token of the live session named by a Cookie header ("" if none).
  std::string csrf_for(const std::string& cookie_header);
  bool alive(const std::string& cookie_header);
  // Ends the session named by a Cookie header; false if there was none.
  bool end(const std::string& cookie_header);

  // secure: only over HTTPS (the service serves TLS itself).
  static std::string set_cookie(const std::string& id, bool secure);
  static std::string clear_cookie(bool secure);
  // One cookie's value from a Cookie header ("a=1; b=2"); "" when absent.
  static std::string cookie_value(const std::string& cookie_header, const std::string& name);

 private:
  struct Entry {
    Principal who;
    std::string csrf;
    std::string token_sha256;
    std::chrono::steady_clock::time_point last_seen;
  };
  // The live entry for a Cookie header, or nullptr; drops an expired one. Caller holds mu_.
  Entry* find_locked(const std::string& cookie_header);

  Store& store_;
  std::chrono::seconds idle_limit_;
  std::mutex mu_;
  std::map<std::string, Entry> sessions_;  // by SHA-256 of the session id
};

}  // namespace gpulab::service
