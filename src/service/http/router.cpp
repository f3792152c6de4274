// Request dispatch: match, authenticate, run, and turn every failure into the error envelope.
#include "service/http/router.h"

#include <chrono>

#include "core/log.h"
#include "service/base/api_error.h"
#include "service/base/metrics.h"
#include "service/http/web_session.h"

namespace gpulab::service {

ApiReply ApiReply::json(const Json& j, int status) {
  ApiReply r;
  r.status = status;
  // Messages may quote what a client sent (a name, a parse error's "last read"): bytes that are
  // not UTF-8 become U+FFFD instead of throwing type_error 316 out of the request.
  r.body = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return r;
}

ApiReply ApiReply::ok(std::string_view message, Json data) {
  return json(envelope_ok(message, std::move(data)));
}

ApiReply Router::error(ApiCode code, const std::string& message, const std::string& hint) {
  ErrorReply e;
  e.api_code = code;
  e.http_status = api_code_http_status(code);
  e.message = message;
  e.hint = hint;
  return ApiReply::json(envelope_error(e), e.http_status);
}

void Router::add(Route route) {
  routes_.push_back(std::move(route));
}

namespace {

bool match_path(const std::string& pattern, const std::string& path,
                std::map<std::string, std::string>& params) {
  size_t i = 0;
  size_t j = 0;
  std::map<std::string, std::string> found;
  while (i < pattern.size() && j <= path.size()) {
    if (pattern[i] == '{') {
      size_t close = pattern.find('}', i);
      std::string key = pattern.substr(i + 1, close - i - 1);
      size_t end = path.find('/', j);
      if (end == std::string::npos) end = path.size();
      if (end == j) return false;
      found[key] = path.substr(j, end - j);
      i = close + 1;
      j = end;
    } else {
      if (j >= path.size() || pattern[i] != path[j]) return false;
      ++i;
      ++j;
    }
  }
  if (i != pattern.size() || j != path.size()) return false;
  params = std::move(found);
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 &&
               hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> parse_query(std::string_view query) {
  std::map<std::string, std::string> m;
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view part = query.substr(start, amp - start);
    if (!part.empty()) {
      size_t eq = part.find('=');
      if (eq == std::string_view::npos) {
        m[url_decode(part)] = "";
      } else {
        m[url_decode(part.substr(0, eq))] = url_decode(part.substr(eq + 1));
      }
    }
    start = amp + 1;
  }
  return m;
}

const Route* Router::match(const std::string& method, const std::string& path,
                           std::map<std::string, std::string>& params, bool& path_known) const {
  path_known = false;
  for (const auto& r : routes_) {
    std::map<std::string, std::string> p;
    if (!match_path(r.path, path, p)) continue;
    path_known = true;
    if (r.method == method) {
      params = std::move(p);
      return &r;
    }
  }
  return nullptr;
}

Principal Router::authenticate(const Route& route, const std::string& authorization) const {
  if (!route.authenticated) return Principal{kLocalUser, false};
  return auth_.authenticate(authorization);
}

Principal Router::authenticate(const Route& route, const ApiRequest& request) const {
  if (!route.authenticated) return authenticate(route, request.authorization);
  if (request.authorization.empty() && sessions_ && !request.cookie.empty()) {
    bool changes = request.method != "GET" && request.method != "HEAD";
    if (auto who = sessions_->authenticate(request.cookie, changes, request.csrf_token))
      return *who;
  }
  return check_token(request.authorization, request.remote);
}

// A request without a token is not a guess: only presented tokens count as failures.
Principal Router::check_token(const std::string& authorization, const std::string& address) const {
  if (!throttle_ || authorization.empty()) return auth_.authenticate(authorization);
  if (int wait = throttle_->retry_after_s(address); wait > 0) throw ThrottledError(wait, address);
  try {
    Principal who = auth_.authenticate(authorization);
    throttle_->succeeded(address);
    return who;
  } catch (const ApiError& e) {
    if (e.api_code() == ApiCode::kUnauthorized) throttle_->failed(address);
    throw;
  }
}

ApiReply Router::refusal(const Exception& e) {
  ErrorReply er = error_reply(e);
  ApiReply reply = ApiReply::json(envelope_error(er), er.http_status);
  if (const auto* t = dynamic_cast<const ThrottledError*>(&e))
    reply.headers.emplace_back("Retry-After", std::to_string(t->retry_after_s()));
  return reply;
}

ApiReply Router::dispatch(ApiRequest request) const noexcept {
  try {
    return dispatch_checked(std::move(request));
  } catch (...) {
    // Only allocation can get here (formatting an error reply failed): a fixed answer.
    ApiReply r;
    r.status = 500;
    r.body = R"({"success":false,"message":"Internal error","error_code":"INTERNAL_ERROR"})";
    return r;
  }
}

ApiReply Router::dispatch_checked(ApiRequest request) const {
  auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::string> params;
  bool known = false;
  const Route* route = match(request.method, request.path, params, known);
  ApiReply reply;
  std::string label = route ? route->path : "unmatched";
  if (!route) {
    reply = known ? error(ApiCode::kMethodNotAllowed,
                          "Method " + request.method + " not allowed on " + request.path)
                  : error(ApiCode::kNotFound, "No such endpoint: " + request.path,
                          "see /api/v1/openapi.json");
  } else {
    for (auto& [k, v] : params) request.query[k] = v;
    std::string user;
    bool authenticated = false;
    try {
      Principal who = authenticate(*route, request);
      authenticated = true;
      user = who.user;
      reply = route->handler(request, who);
    } catch (const Exception& e) {
      ErrorReply er = error_reply(e);
      if (er.api_code == ApiCode::kInternalError)
        spdlog::error("{} {}: {}", request.method, request.path, e.error().to_string());
      reply = refusal(e);
      if (refusal_sink_ && (request.method != "GET" || !authenticated)) {
        try {
          refusal_sink_(request, user, route->path, er);
        } catch (const std::exception& audit) {
          spdlog::error("auditing a refused {} {}: {}", request.method, request.path, audit.what());
        }
      }
    } catch (const std::exception& e) {
      spdlog::error("{} {}: unexpected: {}", request.method, request.path, e.what());
      reply = error(ApiCode::kInternalError, std::string("Internal error: ") + e.what(),
                    "see the service log");
    } catch (...) {
      spdlog::error("{} {}: unexpected non-standard exception", request.method, request.path);
      reply = error(ApiCode::kInternalError, "Internal error", "see the service log");
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (metrics_) metrics_->observe_request(request.method, label, reply.status, secs);
  return reply;
}

}  // namespace gpulab::service
