// Implementation of the client's shared helpers: engine calls with error mapping, query and
// filter strings, JSON accessors, the JSON-lines splitter and the stdout/stderr demultiplexer.
#include "docker/client_internal.h"

#include <cstdint>

#include "docker/engine_error.h"

namespace gpulab::docker::detail {

Result<HttpResponse> call(HttpTransport& transport, const HttpRequest& request,
                          std::string_view what) {
  auto resp = transport.send(request);
  if (!resp.ok()) {
    Error e = resp.error();
    e.message = std::string(what) + ": " + e.message;
    return e;
  }
  if (resp->status >= 400) return error_from_response(resp->status, resp->body, what);
  return resp;
}

Result<Json> call_json(HttpTransport& transport, const HttpRequest& request,
                       std::string_view what) {
  auto resp = call(transport, request, what);
  if (!resp.ok()) return resp.error();
  if (resp->body.empty()) return Json();
  auto j = parse_json(resp->body, "Docker engine answer");
  if (!j.ok())
    return Error(Code::kInternal, std::string(what) + ": " + j.error().message,
                 "the engine answered with something that is not JSON");
  return j;
}

Query& Query::add(const std::string& key, const std::string& value) {
  if (value.empty()) return *this;
  s_ += s_.empty() ? '?' : '&';
  s_ += url_encode(key) + "=" + url_encode(value);
  return *this;
}

std::string Query::str() const {
  return s_;
}

std::string filters(const std::map<std::string, std::vector<std::string>>& f) {
  Json j = Json::object();
  for (const auto& [k, v] : f)
    if (!v.empty()) j[k] = v;
  return j.empty() ? std::string() : j.dump();
}

const Json& child(const Json& j, const char* key) {
  static const Json null_json;
  if (!j.is_object()) return null_json;
  auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

std::string str(const Json& j, const char* key, const std::string& fallback) {
  const Json& v = child(j, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

std::int64_t num(const Json& j, const char* key, std::int64_t fallback) {
  const Json& v = child(j, key);
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_float()) return static_cast<std::int64_t>(v.get<double>());
  return fallback;
}

bool boolean(const Json& j, const char* key, bool fallback) {
  const Json& v = child(j, key);
  return v.is_boolean() ? v.get<bool>() : fallback;
}

std::vector<std::string> strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  const Json& v = child(j, key);
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_string()) out.push_back(e.get<std::string>());
  if (v.is_string()) out.push_back(v.get<std::string>());  // Cmd may be a plain string
  return out;
}

std::map<std::string, std::string> string_map(const Json& j, const char* key) {
  std::map<std::string, std::string> out;
  const Json& v = child(j, key);
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it->is_string()) out[it.key()] = it->get<std::string>();
  return out;
}

void JsonLines::feed(std::string_view chunk) {
  buf_.append(chunk);
  std::size_t start = 0;
  for (std::size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1)
    line(std::string_view(buf_).substr(start, nl - start));
  buf_.erase(0, start);
}

void JsonLines::finish() {
  if (!buf_.empty()) line(buf_);
  buf_.clear();
}

void JsonLines::line(std::string_view l) {
  while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.remove_suffix(1);
  if (l.empty()) return;
  Json j = Json::parse(l, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) j = Json{{"stream", std::string(l)}};  // keep odd lines as text
  fn_(j);
}

Progress to_progress(const Json& j) {
  Progress p;
  p.stream = str(j, "stream");
  p.status = str(j, "status");
  p.id = str(j, "id");
  p.error = str(child(j, "errorDetail"), "message", str(j, "error"));
  p.raw = j;
  return p;
}

bool Demuxer::feed(std::string_view chunk) {
  if (raw_) return sink_(false, chunk);
  buf_.append(chunk);
  std::size_t pos = 0;
  while (buf_.size() - pos >= 8) {
    auto b = [&](std::size_t i) {
      return static_cast<std::uint32_t>(static_cast<unsigned char>(buf_[pos + i]));
    };
    std::uint32_t len = (b(4) << 24) | (b(5) << 16) | (b(6) << 8) | b(7);
    if (buf_.size() - pos - 8 < len) break;
    bool is_stderr = buf_[pos] == 2;
    if (!sink_(is_stderr, std::string_view(buf_).substr(pos + 8, len))) {
      buf_.clear();
      return false;
    }
    pos += 8 + len;
  }
  buf_.erase(0, pos);
  return true;
}

}  // namespace gpulab::docker::detail
