// HTTP/1.1 transport for the Docker Engine API: an interface (where tests and other backends cut)
// and a libcurl implementation over a unix socket or TCP (+TLS), with streaming in both directions.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpulab::docker {

// Words in the kUnavailable error of a call ended by abandon_stalled_calls (a caller that knows
// the host's name adds it).
inline constexpr const char* kAbandonedCallWords = "the call was abandoned";

// Hint attached to kUnavailable errors when the engine cannot be reached.
inline constexpr const char* kStartEngineHint =
    "start dockerd (sudo systemctl start docker) or point DOCKER_HOST at a running engine";

// Where the engine listens. Parsed from DOCKER_HOST-style strings:
//   unix:///var/run/docker.sock      (default)
//   tcp://host:2376                  (TLS when DOCKER_TLS_VERIFY is set or a cert dir is given)
struct Endpoint {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string socket_path = "/var/run/docker.sock";  // kUnix
  std::string host;                                  // kTcp
  int port = 2375;                                   // kTcp
  bool tls = false;                                  // kTcp: https
  bool tls_verify = true;                            // check the server certificate against ca_file
  std::string ca_file, cert_file, key_file;  // PEM files (DOCKER_CERT_PATH/{ca,cert,key}.pem)

  // "unix:///path", "/path" (a bare absolute path means a unix socket), "tcp://host:port".
  static Result<Endpoint> parse(std::string_view docker_host);
  // $DOCKER_HOST (+ DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) or the default unix socket.
  static Result<Endpoint> from_env();
  // Same form parse() takes: "unix:///run/x.sock", "tcp://h:2376".
  std::string to_string() const;
};

// Fills buf with up to cap bytes of the request body; returns the count, 0 at the end.
// An Error aborts the request (the transport returns that error).
using BodyReader = std::function<Result<std::size_t>(char* buf, std::size_t cap)>;
// Receives the response body piece by piece (only for 2xx responses); return false to stop early.
using BodySink = std::function<bool(std::string_view chunk)>;

struct HttpRequest {
  std::string method = "GET";
  // Path with query, already percent-encoded: "/v1.41/containers/json?all=1".
  std::string target;
  std::vector<std::pair<std::string, std::string>>
      headers;  // e.g. {"Content-Type","application/json"}

  // Request body: exactly one of these, or none. Streamed bodies use chunked encoding unless
  // body_size is known (body_file sets it from the file size).
  std::string body;
  std::filesystem::path body_file;  // upload a file (image load, import, build context)
  BodyReader body_reader;           // upload from a callback
  long long body_size = -1;         // with body_reader: total size if known

  // Response body: by default collected into HttpResponse::body. For a 2xx status it can be
  // streamed instead (an error status is always collected, so its message can be read).
  std::filesystem::path response_file;  // write the body to this file (image save, archive)
  BodySink on_data;                     // or hand it over piece by piece (logs, events, build)

  // Stops a long request (events, follow logs) soon after it turns true (checked about once a
  // second, and whenever data arrives); a cancelled request still succeeds, with
  // HttpResponse::cancelled set.
  const std::atomic<bool>* cancel = nullptr;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds timeout{0};  // whole request; 0 = no limit (streams)
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;        // empty when streamed to response_file / on_data (2xx)
  bool cancelled = false;  // the request's cancel flag (or a BodySink returning false) stopped it
  // Value of a header, case-insensitive; empty if absent.
  std::string header(std::string_view name) const;
};

// One request at a time per call; implementations must allow concurrent calls from several
// threads (the service does that), e.g. by using a separate connection for each call.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Fails (kUnavailable) only when the server cannot be reached or the connection breaks,
  // (kTimeout) when the request's timeout passes; any HTTP status is a successful send.
  virtual Result<HttpResponse> send(const HttpRequest& request) = 0;
  // For messages: "unix:///run/docker.sock".
  virtual std::string describe() const = 0;
  // The engine stopped answering (its host was marked down): every call already in flight that
  // has moved no byte for `idle` (now, or later while it waits) ends with kUnavailable instead of
  // waiting out its own limit (a read's 30 s, a stop's grace time). Calls sent afterwards are not
  // affected; a call still streaming data goes on.
  virtual void abandon_stalled_calls(std::chrono::milliseconds idle) {}
};

// libcurl transport for an endpoint (unix socket or TCP/TLS). A fresh easy handle per call,
// so one transport may be used from many threads.
std::unique_ptr<HttpTransport> make_curl_transport(const Endpoint& endpoint);

// Percent-encodes a query value (RFC 3986 unreserved characters pass through).
std::string url_encode(std::string_view s);

}  // namespace gpulab::docker
