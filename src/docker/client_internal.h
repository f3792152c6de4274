// Helpers shared by the client's source files (not part of the public API): calling the engine
// with error mapping, query strings, filters, JSON field access and the progress-line stream.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "docker/http_transport.h"
#include "docker/types.h"

namespace gpulab::docker::detail {

// Sends and maps failures: a transport error gets `what` prefixed, an HTTP status >= 400 becomes
// error_from_response(status, body, what). 304 passes as success.
Result<HttpResponse> call(HttpTransport& transport, const HttpRequest& request,
                          std::string_view what);
// call() then parses the body as JSON.
Result<Json> call_json(HttpTransport& transport, const HttpRequest& request, std::string_view what);

// Builds "?a=1&b=x%20y" from pairs, skipping empty values.
class Query {
 public:
  Query& add(const std::string& key, const std::string& value);
  // Without this, a string literal would pick the bool overload (pointer -> bool).
  Query& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  Query& add(const std::string& key, bool value) {
    return add(key, std::string(value ? "1" : "0"));
  }
  Query& add(const std::string& key, long long value) { return add(key, std::to_string(value)); }
  std::string str() const;

 private:
  std::string s_;
};

// The engine's filters parameter: {"label":["a=b"],...} as JSON ({} entries dropped); "" if none.
std::string filters(const std::map<std::string, std::vector<std::string>>& f);

// Safe accessors: missing or null fields give the fallback.
std::string str(const Json& j, const char* key, const std::string& fallback = {});
std::int64_t num(const Json& j, const char* key, std::int64_t fallback = 0);
bool boolean(const Json& j, const char* key, bool fallback = false);
std::vector<std::string> strings(const Json& j, const char* key);
std::map<std::string, std::string> string_map(const Json& j, const char* key);
const Json& child(const Json& j, const char* key);  // a null Json when absent

// Splits a stream of newline-separated JSON messages (build, load, import, events) arriving in
// arbitrary pieces, and hands each parsed object on.
class JsonLines {
 public:
  explicit JsonLines(std::function<void(const Json&)> fn) : fn_(std::move(fn)) {}
  void feed(std::string_view chunk);
  void finish();  // a last line without newline

 private:
  void line(std::string_view l);
  std::function<void(const Json&)> fn_;
  std::string buf_;
};

// One progress message; error is filled from errorDetail.message or error.
Progress to_progress(const Json& j);

// Splits the engine's multiplexed stdout/stderr stream (8-byte frame headers) into pieces.
class Demuxer {
 public:
  using Sink = std::function<bool(bool is_stderr, std::string_view data)>;
  Demuxer(bool raw, Sink sink) : raw_(raw), sink_(std::move(sink)) {}
  bool feed(std::string_view chunk);  // false when the sink asked to stop

 private:
  bool raw_;
  Sink sink_;
  std::string buf_;
};

// Typed views of engine answers (container_json.cpp, image_json.cpp, stats.cpp).
ContainerInfo parse_container_info(Json j);
ContainerSummary parse_container_summary(const Json& j);
ImageInfo parse_image_info(Json j);
ImageSummary parse_image_summary(const Json& j);
ContainerStats parse_stats(Json j);
Event parse_event(Json j);

}  // namespace gpulab::docker::detail
