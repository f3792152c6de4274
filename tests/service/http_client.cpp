// libcurl-based test client (see http_client.h).
#include "http_client.h"

#include <cstdio>
#include <cstring>
#include <utility>

namespace gpulab::service::testing {

namespace {

// A request that never left: no status, the reason in `error`.
HttpResult failed(std::string why) {
  HttpResult r;
  r.error = std::move(why);
  return r;
}

size_t collect(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

size_t to_file(char* p, size_t size, size_t n, void* f) {
  return std::fwrite(p, size, n, static_cast<FILE*>(f)) * size;
}

struct Zeros {
  long long left;
};

size_t read_zeros(char* buf, size_t size, size_t n, void* z) {
  auto* zz = static_cast<Zeros*>(z);
  size_t want = std::min<long long>(zz->left, static_cast<long long>(size * n));
  std::memset(buf, 0, want);
  zz->left -= static_cast<long long>(want);
  return want;
}

}  // namespace

Json HttpResult::json() const {
  try {
    return Json::parse(body);
  } catch (...) {
    return nullptr;
  }
}

HttpClient::HttpClient(std::string base_url, std::string token)
    : base_(std::move(base_url)), token_(std::move(token)), curl_(curl_easy_init()) {}

HttpClient::~HttpClient() {
  curl_easy_cleanup(curl_);
}

long HttpClient::connections_opened() const {
  long n = 0;
  curl_easy_getinfo(curl_, CURLINFO_NUM_CONNECTS, &n);
  return n;
}

HttpResult HttpClient::perform(const std::string& method, const std::string& path) {
  HttpResult r;
  char err[CURL_ERROR_SIZE] = {0};
  std::string url = base_ + path;
  curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(curl_, CURLOPT_TIMEOUT, 600L);
  curl_easy_setopt(curl_, CURLOPT_CAINFO, ca_file_.empty() ? nullptr : ca_file_.c_str());
  std::string iface = "host!" + local_;
  curl_easy_setopt(curl_, CURLOPT_INTERFACE, local_.empty() ? nullptr : iface.c_str());
  curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, collect);
  curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &r.headers);
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  std::string auth = "Authorization: Bearer " + token_;
  if (!token_.empty()) headers = curl_slist_append(headers, auth.c_str());
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
  if (!to_file_) {
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &r.body);
  }
  CURLcode rc = curl_easy_perform(curl_);
  if (rc != CURLE_OK) r.error = err[0] ? err : curl_easy_strerror(rc);
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  // Back to a plain state for the next request on this (kept-alive) handle.
  curl_easy_setopt(curl_, CURLOPT_POST, 0L);
  curl_easy_setopt(curl_, CURLOPT_UPLOAD, 0L);
  curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl_, CURLOPT_READFUNCTION, nullptr);
  curl_easy_setopt(curl_, CURLOPT_READDATA, nullptr);
  to_file_ = false;
  return r;
}

HttpResult HttpClient::get(const std::string& path) {
  curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
  return perform("GET", path);
}

HttpResult HttpClient::post(const std::string& path, const std::string& body) {
  curl_easy_setopt(curl_, CURLOPT_POST, 1L);
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl_, CURLOPT_COPYPOSTFIELDS, body.c_str());
  return perform("POST", path);
}

HttpResult HttpClient::post_zeros(const std::string& path, long long size) {
  Zeros z{size};
  curl_easy_setopt(curl_, CURLOPT_POST, 1L);
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, nullptr);
  curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(size));
  curl_easy_setopt(curl_, CURLOPT_READFUNCTION, read_zeros);
  curl_easy_setopt(curl_, CURLOPT_READDATA, &z);
  return perform("POST", path);
}

HttpResult HttpClient::put_file(const std::string& path, const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return failed("cannot open " + file);
  std::fseek(f, 0, SEEK_END);
  long long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  curl_easy_setopt(curl_, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(curl_, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  curl_easy_setopt(curl_, CURLOPT_READFUNCTION, nullptr);
  curl_easy_setopt(curl_, CURLOPT_READDATA, f);
  auto r = perform("PUT", path);
  std::fclose(f);
  return r;
}

HttpResult HttpClient::download(const std::string& path, const std::string& dest) {
  FILE* f = std::fopen(dest.c_str(), "wb");
  if (!f) return failed("cannot create " + dest);
  curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, to_file);
  curl_easy_setopt(curl_, CURLOPT_WRITEDATA, f);
  to_file_ = true;
  auto r = perform("GET", path);
  std::fclose(f);
  return r;
}

}  // namespace gpulab::service::testing
