// Routes requests to handlers: method + path table, authentication, the error envelope for
// anything a handler throws, and per-route counters for /metrics. Knows nothing of sockets.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "service/base/api_error.h"
#include "service/domain/validation.h"
#include "service/http/auth.h"
#include "service/http/auth_throttle.h"

namespace gpulab::service {

class Metrics;
class EventHub;
class WebSessions;

struct ApiRequest {
  std::string method;
  std::string path;                          // without the query
  std::map<std::string, std::string> query;  // decoded
  std::string body;                          // JSON requests
  std::string upload_file;                   // streamed uploads: where the body was written
  std::string authorization;                 // Authorization header value
  std::string remote;                        // peer address, for the audit log
  std::string cookie;                        // Cookie header: the dashboard's session
  std::string csrf_token;                    // X-CSRF-Token header
};

struct ApiReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string file;  // when set, the body is this file, streamed
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the connection becomes a Server-Sent Events stream of this hub's events for as long
  // as stream_allowed() says yes (the session or token behind it is still valid).
  const EventHub* events = nullptr;
  std::function<bool()> stream_allowed;
  static ApiReply json(const Json& j, int status = 200);
  static ApiReply ok(std::string_view message, Json data);  // the seed's success envelope
};

using Handler = std::function<ApiReply(const ApiRequest&, const Principal&)>;

// Registered with designated initializers, naming only what differs from these defaults:
//   r.add({.method = "GET", .path = ..., .handler = ..., .summary = ..., .tag = ...,
//          .authenticated = false});
struct Route {
  std::string method = {};  // "GET", "POST", "PUT", "DELETE"
  std::string path = {};    // exact path; "{name}" matches one segment (passed as query["name"])
  Handler handler = {};
  std::string summary = {};
  std::string tag = {};                        // OpenAPI group
  const RequestSchema* schema = nullptr;       // JSON body, for OpenAPI
  std::vector<std::string> query_params = {};  // documented query parameters
  bool authenticated = true;                   // false: open (health, metrics, openapi)
  bool streamed_upload = false;                // body goes to a file, not memory
  bool binary_response = false;                // for OpenAPI: application/octet-stream
};

class Router {
 public:
  Router(Auth& auth, Metrics* metrics) : auth_(auth), metrics_(metrics) {}
  void add(Route route);
  const std::vector<Route>& routes() const { return routes_; }

  // The route for method+path, filling path parameters into `params`; nullptr if none.
  // `path_known` tells 404 from 405.
  const Route* match(const std::string& method, const std::string& path,
                     std::map<std::string, std::string>& params, bool& path_known) const;

  // Authenticates (throws ApiError) without running anything: used before accepting an upload.
  Principal authenticate(const Route& route, const std::string& authorization) const;
  // The same, also accepting a dashboard session cookie (with its CSRF token for changes).
  Principal authenticate(const Route& route, const ApiRequest& request) const;
  // A token check from `address`, slowed down by the throttle (TOO_MANY_REQUESTS) when set.
  Principal check_token(const std::string& authorization, const std::string& address) const;
  void set_sessions(WebSessions* sessions) { sessions_ = sessions; }
  void set_throttle(AuthThrottle* throttle) { throttle_ = throttle; }
  // Called for every refused change (a request other than GET that ended in an error) and every
  // refused authentication: who asked ("" when unknown), what, and why. The service writes
  // them to the audit log.
  using RefusalSink = std::function<void(const ApiRequest&, const std::string& user,
                                         const std::string& route, const ErrorReply&)>;
  void set_refusal_sink(RefusalSink sink) { refusal_sink_ = std::move(sink); }

  // Runs a request to completion; never throws: whatever fails becomes the error envelope.
  ApiReply dispatch(ApiRequest request) const noexcept;

  // Formats an error reply (used by the server for errors before dispatch: 413, timeouts).
  static ApiReply error(ApiCode code, const std::string& message, const std::string& hint = {});
  // The error envelope for `e` (with Retry-After for a throttled request).
  static ApiReply refusal(const Exception& e);

 private:
  ApiReply dispatch_checked(ApiRequest request) const;
  Auth& auth_;
  Metrics* metrics_;
  WebSessions* sessions_ = nullptr;
  AuthThrottle* throttle_ = nullptr;
  RefusalSink refusal_sink_;
  std::vector<Route> routes_;
};

// Splits "a=1&b=x%20y" into decoded pairs.
std::map<std::string, std::string> parse_query(std::string_view query);

}  // namespace gpulab::service
