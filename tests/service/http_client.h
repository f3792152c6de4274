// A small libcurl client for the service tests: JSON requests, file upload/download, and a
// reused connection (to observe keep-alive).
#pragma once

#include <curl/curl.h>

#include <string>

#include "core/json.h"

namespace gpulab::service::testing {

// The service's API prefix, as every test that calls it spells it.
inline const std::string kApi = "/api/v1/gpu-docker";

struct HttpResult {
  long status = 0;
  std::string body;
  std::string headers;  // the raw response header lines
  std::string error;    // curl's error when no answer came
  Json json() const;    // parsed body (null if not JSON)
};

// Envelope helpers.
inline bool ok(const HttpResult& r) {
  return r.status == 200 && r.json().value("success", false);
}
inline std::string code(const HttpResult& r) {
  return r.json().value("error_code", std::string());
}

class HttpClient {
 public:
  explicit HttpClient(std::string base_url, std::string token = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void set_token(std::string token) { token_ = std::move(token); }
  // HTTPS: trust only this CA (PEM); empty: the system's CAs.
  void set_ca_file(std::string ca_file) { ca_file_ = std::move(ca_file); }
  // Connect from this local address (e.g. "127.0.0.2", to be another client).
  void set_local_address(std::string address) { local_ = std::move(address); }
  HttpResult get(const std::string& path);
  HttpResult post(const std::string& path, const std::string& body);
  HttpResult post_json(const std::string& path, const Json& body) {
    return post(path, body.dump());
  }
  // Sends a body of `size` zero bytes (announced with Content-Length).
  HttpResult post_zeros(const std::string& path, long long size);
  HttpResult put_file(const std::string& path, const std::string& file);
  HttpResult download(const std::string& path, const std::string& dest_file);
  long connections_opened() const;  // new connections the last request had to open

 private:
  HttpResult perform(const std::string& method, const std::string& path);
  std::string base_, token_, ca_file_, local_;
  CURL* curl_;
  bool to_file_ = false;
};

}  // namespace gpulab::service::testing
