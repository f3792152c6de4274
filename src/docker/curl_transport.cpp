// libcurl implementation of HttpTransport: one easy handle per request (so calls from several
// threads never share state), unix socket or TCP/TLS, streamed upload and download, cancel.
#include <curl/curl.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include "core/strings.h"
#include "docker/http_transport.h"
#include "docker/tls_diagnosis.h"

namespace gpulab::docker {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// A transport's abandon requests: how many so far, and the idle time each asks for.
struct Abandon {
  std::atomic<uint64_t> epoch{0};
  std::atomic<int64_t> idle_ms{0};
  // When any call last received a byte from the engine (steady clock, ns): a busy engine answers
  // some call (a ping, a list) while a start waits its turn; a hung one answers none.
  std::atomic<int64_t> heard_ns{0};
};

// State shared with the libcurl callbacks of one request.
struct Call {
  const HttpRequest* req = nullptr;
  CURL* curl = nullptr;
  HttpResponse resp;
  FilePtr upload, download;
  std::size_t body_offset = 0;  // for an in-memory body sent by the read callback
  std::optional<Error> error;   // set by a callback that aborted the transfer
  bool stopped_by_sink = false;
  char error_text[CURL_ERROR_SIZE] = {};  // libcurl's words for a failure (TLS: which side)
  // Abandoning stalled calls (HttpTransport::abandon_stalled_calls): the transport's count of
  // abandon requests when this call started, and when it last moved a byte.
  Abandon* abandon = nullptr;
  uint64_t epoch = 0;
  curl_off_t bytes_moved = 0;
  curl_off_t bytes_down = 0;
  std::chrono::steady_clock::time_point last_moved = std::chrono::steady_clock::now();
  bool abandoned = false;

  bool streaming_2xx() {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code >= 200 && code < 300 && (download || req->on_data);
  }
};

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  std::string line(data, size * n);
  if (starts_with(line, "HTTP/")) {
    call->resp.headers.clear();  // a new status line (after "100 Continue") starts afresh
    return size * n;
  }
  auto colon = line.find(':');
  if (colon != std::string::npos)
    call->resp.headers.emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  return size * n;
}

// An error status's body is a short message; one larger than this is not from an engine.
constexpr std::size_t kMaxErrorBody = 64u << 20;

std::size_t on_write(char* data, std::size_t size, std::size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  std::size_t len = size * n;
  if (!call->streaming_2xx()) {
    long code = 0;
    curl_easy_getinfo(call->curl, CURLINFO_RESPONSE_CODE, &code);
    if ((code < 200 || code >= 300) && call->resp.body.size() + len > kMaxErrorBody) {
      call->error = Error(Code::kUnavailable,
                          "an error answer larger than 64 MiB (HTTP " + std::to_string(code) +
                              "): not a Docker engine, or a broken one",
                          "check that the URL names the Docker engine's port");
      return 0;
    }
    call->resp.body.append(data, len);
    return len;
  }
  if (call->download) {
    if (std::fwrite(data, 1, len, call->download.get()) != len) {
      call->error = Error(Code::kInternal,
                          "cannot write " + call->req->response_file.string() + " (disk full?)");
      return 0;
    }
    return len;
  }
  if (!call->req->on_data(std::string_view(data, len))) {
    call->stopped_by_sink = true;
    return 0;
  }
  return len;
}

std::size_t on_read(char* buf, std::size_t size, std::size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  std::size_t cap = size * n;
  if (call->upload) {
    std::size_t got = std::fread(buf, 1, cap, call->upload.get());
    if (got == 0 && std::ferror(call->upload.get())) {
      call->error = Error(Code::kInternal, "cannot read " + call->req->body_file.string());
      return CURL_READFUNC_ABORT;
    }
    return got;
  }
  if (call->req->body_reader) {
    auto got = call->req->body_reader(buf, cap);
    if (!got.ok()) {
      call->error = got.error();
      return CURL_READFUNC_ABORT;
    }
    return *got;
  }
  const std::string& body = call->req->body;
  std::size_t left = body.size() - call->body_offset;
  std::size_t k = left < cap ? left : cap;
  body.copy(buf, k, call->body_offset);
  call->body_offset += k;
  return k;
}

// libcurl calls it often while bytes move and about once a second while none do.
int on_progress(void* user, curl_off_t, curl_off_t down, curl_off_t, curl_off_t up) {
  auto* call = static_cast<Call*>(user);
  if (call->req->cancel && call->req->cancel->load()) return 1;
  const auto now = std::chrono::steady_clock::now();
  if (down + up != call->bytes_moved) {
    call->bytes_moved = down + up;
    call->last_moved = now;
  }
  if (down != call->bytes_down) {
    call->bytes_down = down;
    call->abandon->heard_ns = now.time_since_epoch().count();
  }
  if (call->abandon->epoch.load() == call->epoch) return 0;
  const std::chrono::milliseconds idle(call->abandon->idle_ms.load());
  if (now - call->last_moved < idle) return 0;
  // The engine answered another call within `idle`: busy, not hung (its host was marked for a
  // late answer under load); this call waits on, and ends once the engine goes silent.
  const std::chrono::steady_clock::time_point heard{
      std::chrono::steady_clock::duration(call->abandon->heard_ns.load())};
  if (now - heard < idle) return 0;
  call->abandoned = true;
  return 1;
}

class CurlTransport : public HttpTransport {
 public:
  explicit CurlTransport(Endpoint ep) : ep_(std::move(ep)) { global_init(); }

  std::string describe() const override { return ep_.to_string(); }

  void abandon_stalled_calls(std::chrono::milliseconds idle) override {
    abandon_.idle_ms = idle.count();
    ++abandon_.epoch;
  }

  Result<HttpResponse> send(const HttpRequest& req) override {
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return Error(Code::kInternal, "curl_easy_init failed");
    Call call;
    call.req = &req;
    call.curl = curl.get();
    call.abandon = &abandon_;
    call.epoch = abandon_.epoch.load();
    CURL* c = curl.get();
    const std::string url = set_target(c, req);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM-based timeouts
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, call.error_text);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout.count()));
    if (req.timeout.count() > 0)
      curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));

    struct curl_slist* headers = nullptr;
    for (const auto& [k, v] : req.headers)
      headers = curl_slist_append(headers, (k + ": " + v).c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_guard(nullptr, curl_slist_free_all);
    Status body = set_body(c, req, call, headers);
    header_guard.reset(headers);
    if (!body.ok()) return body.error();
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (req.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (auto st = set_response(c, req, call); !st.ok()) return st.error();
    return perform(c, req, call);
  }

 private:
  // The URL for req.target on this endpoint (a unix socket or TCP, with TLS options).
  std::string set_target(CURL* c, const HttpRequest& req) const {
    if (ep_.kind == Endpoint::Kind::kUnix) {
      curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, ep_.socket_path.c_str());
      return "http://docker" + req.target;  // host name is ignored on a unix socket
    }
    std::string host = ep_.host.find(':') != std::string::npos ? "[" + ep_.host + "]" : ep_.host;
    if (ep_.tls) {
      if (!ep_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ep_.ca_file.c_str());
      if (!ep_.cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, ep_.cert_file.c_str());
      if (!ep_.key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, ep_.key_file.c_str());
      curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, ep_.tls_verify ? 1L : 0L);
      curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, ep_.tls_verify ? 2L : 0L);
    }
    return std::string(ep_.tls ? "https://" : "http://") + host + ":" + std::to_string(ep_.port) +
           req.target;
  }

  // Body: an upload (PUT semantics in curl; the method is then set explicitly).
  static Status set_body(CURL* c, const HttpRequest& req, Call& call, curl_slist*& headers) {
    bool has_stream = !req.body_file.empty() || static_cast<bool>(req.body_reader);
    long long size = req.body_size;
    if (!req.body_file.empty()) {
      std::error_code ec;
      size = static_cast<long long>(std::filesystem::file_size(req.body_file, ec));
      call.upload.reset(std::fopen(req.body_file.c_str(), "rb"));
      if (ec || !call.upload)
        return Error(Code::kNotFound, "cannot open " + req.body_file.string() + " for upload");
    }
    if (has_stream || !req.body.empty() || req.method == "POST" || req.method == "PUT") {
      if (!has_stream) size = static_cast<long long>(req.body.size());
      curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
      curl_easy_setopt(c, CURLOPT_READDATA, &call);
      if (size >= 0) curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
      headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    }
    return ok_status();
  }

  // Where the response goes (memory, a file or a sink), and cancellation.
  static Status set_response(CURL* c, const HttpRequest& req, Call& call) {
    if (!req.response_file.empty()) {
      call.download.reset(std::fopen(req.response_file.c_str(), "wb"));
      if (!call.download)
        return Error(Code::kInternal, "cannot create " + req.response_file.string());
    }
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &call);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &call);
    // Always: a cancel flag, and an abandon request for a call stalled on a hung engine.
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &call);
    return ok_status();
  }

  Result<HttpResponse> perform(CURL* c, const HttpRequest& req, Call& call) const {
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    call.resp.status = static_cast<int>(code);
    if (call.download) {
      bool flushed = std::fflush(call.download.get()) == 0;
      call.download.reset();
      if (!flushed && !call.error)
        call.error = Error(Code::kInternal, "cannot write " + req.response_file.string());
    }
    if (call.error) return *call.error;
    if (call.abandoned)
      return Error(Code::kUnavailable,
                   "the engine at " + ep_.to_string() +
                       " stopped answering while this call waited; " + kAbandonedCallWords +
                       " when its host was marked down (the engine may still carry it out)",
                   "the host's state says when it answers again; the service then reads what "
                   "its engine did");
    if (rc == CURLE_ABORTED_BY_CALLBACK || (rc == CURLE_WRITE_ERROR && call.stopped_by_sink)) {
      call.resp.cancelled = true;
      return std::move(call.resp);
    }
    if (rc != CURLE_OK) return transport_error(rc, code, call.error_text);
    return std::move(call.resp);
  }

  Error transport_error(CURLcode rc, long status, std::string_view detail) const {
    std::string what = "Docker engine at " + ep_.to_string();
    if (ep_.tls)
      if (auto tls = tls_failure(rc, detail, what, ep_.host)) return *tls;
    switch (rc) {
      case CURLE_OPERATION_TIMEDOUT:
        return Error(Code::kTimeout, what + " did not answer in time",
                     "the engine may be overloaded; try again");
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
        return Error(Code::kUnavailable, "cannot reach the " + what + ": " + curl_easy_strerror(rc),
                     unreachable_hint());
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_PEER_FAILED_VERIFICATION:
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CACERT_BADFILE:
        return Error(Code::kUnavailable,
                     "TLS to the " + what + " failed: " + curl_easy_strerror(rc),
                     "check the CA, client certificate and key given for this engine "
                     "(DOCKER_CERT_PATH's ca.pem, cert.pem, key.pem, or a gpulab serve host's "
                     "tls_ca, tls_cert, tls_key) and that the engine's certificate names " +
                         ep_.host);
      default:
        return Error(Code::kUnavailable,
                     "connection to the " + what + " broke" +
                         (status ? " (after HTTP " + std::to_string(status) + ")" : std::string()) +
                         ": " + curl_easy_strerror(rc),
                     unreachable_hint());
    }
  }

  // The local engine is started here; a remote one is started on its machine and reached over
  // the network, where DOCKER_HOST and systemctl on this machine do not help.
  std::string unreachable_hint() const {
    if (ep_.kind == Endpoint::Kind::kUnix) return kStartEngineHint;
    return "check that dockerd on " + ep_.host + " runs and listens on port " +
           std::to_string(ep_.port) + " (dockerd -H tcp://0.0.0.0:" + std::to_string(ep_.port) +
           (ep_.tls ? " --tlsverify ..." : "") + ") and that this machine can reach it";
  }

  Endpoint ep_;
  Abandon abandon_;
};

}  // namespace

std::string HttpResponse::header(std::string_view name) const {
  std::string want = to_lower(name);
  for (const auto& [k, v] : headers)
    if (to_lower(k) == want) return v;
  return {};
}

std::unique_ptr<HttpTransport> make_curl_transport(const Endpoint& endpoint) {
  return std::make_unique<CurlTransport>(endpoint);
}

std::string url_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

}  // namespace gpulab::docker
