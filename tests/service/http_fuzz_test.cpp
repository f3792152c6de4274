// Arbitrary bytes over real sockets to a real `gpulab serve`: random bodies, mutated JSON, raw
// bytes in paths, query strings and headers, and streams that are not HTTP at all. The service
// must stay up and answer each one with a 4xx error envelope that is valid UTF-8 JSON.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "service_env.h"

namespace gpulab::service::testing {
namespace {

struct RawAnswer {
  int status = 0;  // 0: the connection closed without an answer
  std::string body;
};

// One request on a fresh connection: send everything, half-close, read until the server closes.
RawAnswer send_raw(int port, const std::string& bytes) {
  RawAnswer a;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    a.status = -1;  // refused: the service is gone
    return a;
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server answered early and closed: read what it said
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string in;
  char buf[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (in.rfind("HTTP/1.1 ", 0) == 0 && in.size() >= 12) a.status = std::atoi(in.c_str() + 9);
  auto split = in.find("\r\n\r\n");
  if (split != std::string::npos) a.body = in.substr(split + 4);
  return a;
}

std::string post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

class HttpFuzz : public ServiceTest {};

TEST_F(HttpFuzz, ArbitraryBytesGetErrorEnvelopesAndTheServiceStaysUp) {
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  unsigned seed = 13;
  if (const char* s = std::getenv("GPULAB_FUZZ_SEED")) seed = static_cast<unsigned>(std::atoi(s));
  int rounds = 3000;
  if (const char* s = std::getenv("GPULAB_FUZZ_ROUNDS")) rounds = std::atoi(s);
  std::mt19937 rng(seed);
  auto any = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto bytes = [&](size_t max_len) {
    std::string s(any(max_len + 1), '\0');
    for (auto& c : s) c = static_cast<char>(any(256));
    return s;
  };
  const std::string& api = kApi;
  const std::vector<std::string> posts = {"/create",
                                          "/start",
                                          "/stop",
                                          "/restart",
                                          "/delete",
                                          "/update-resources",
                                          "/snapshot",
                                          "/restore-snapshot",
                                          "/delete-snapshot",
                                          "/backup",
                                          "/restore",
                                          "/backups/delete",
                                          "/users",
                                          "/users/revoke",
                                          "/leases",
                                          "/leases/release"};
  // Well-typed but pointing at nothing, so a mutation that stays valid is still refused (404)
  // instead of creating something; the kinds of value the schema checks all appear.
  const std::vector<std::string> seeds = {
      R"({"name":"fz-none","image":"gpulab-test/not-here:1","gpu_count":1,"port":["1:2"]})",
      R"({"name":"fz-none"})",
      R"({"name":"fz-none","cpus":"0.5","memory":"8g","pids_limit":64})",
      R"({"name":"fz-none","snapshot_name":"fz-snap"})",
      R"({"backup_path":"fz-none.tar","name":"fz-new","env":["A=b"]})",
      R"({"snapshot_name":"fz-none"})",
      R"({"backup_name":"fz-none"})"};
  std::map<std::string, int> by_kind, unanswered;
  int answered = 0;
  auto check = [&](const std::string& kind, const std::string& request) {
    ++by_kind[kind];
    RawAnswer a = send_raw(svc_->port(), request);
    ASSERT_NE(a.status, -1) << "service gone after a " << kind << " request\n" << svc_->log_tail();
    if (a.status == 0) {
      ++unanswered[kind];
      return;
    }
    ++answered;
    EXPECT_GE(a.status, 400) << kind << ": " << a.body;
    EXPECT_LT(a.status, 500) << kind << ": " << a.body;
    Json j = Json::parse(a.body, nullptr, false);  // strict: invalid UTF-8 fails here
    ASSERT_TRUE(j.is_object()) << kind << " answer is not a JSON object: " << a.body;
    EXPECT_EQ(j.value("success", true), false) << a.body;
    EXPECT_TRUE(j["error_code"].is_string()) << a.body;
    EXPECT_TRUE(j["message"].is_string()) << a.body;
  };
  // The request from the issue first: it used to abort the whole service.
  check("issue", post(api + "/restart",
                      "\xa1\x36\x0b"
                      "c"));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds && !HasFatalFailure(); ++i) {
    switch (i % 6) {
      case 0:  // random bytes as a JSON body
        check("body", post(api + posts[any(posts.size())], bytes(64)));
        break;
      case 1: {  // a seed with bytes flipped, inserted or cut
        std::string b = seeds[any(seeds.size())];
        for (int k = 0, n = 1 + static_cast<int>(any(4)); k < n && !b.empty(); ++k) {
          size_t at = any(b.size());
          switch (any(3)) {
            case 0:
              b[at] = static_cast<char>(any(256));
              break;
            case 1:
              b.insert(at, 1, static_cast<char>(any(256)));
              break;
            default:
              b.erase(at, 1 + any(3));
          }
        }
        // Leases and users would accept some valid mutations: only container routes here.
        check("mutated", post(api + posts[any(12)], b));
        break;
      }
      case 2: {  // raw and percent-encoded bytes in the path and the query
        std::string t =
            api + "/" + bytes(12) + "?name=" + bytes(8) + "&backup_name=%" + "A1%FF" + bytes(4);
        for (auto& c : t)
          if (c == ' ' || c == '\r' || c == '\n') c = '_';
        check("target", "GET " + t + " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n");
        break;
      }
      case 3: {  // a header value of arbitrary bytes (Authorization, or any other header)
        std::string v = bytes(40);
        for (auto& c : v)
          if (c == '\r' || c == '\n') c = 'x';
        std::string name = any(2) ? "Authorization" : "X-Fuzz";
        check("header", "GET " + api + "/logs?name=fz-none HTTP/1.1\r\nHost: fuzz\r\n" + name +
                            ": " + v + "\r\nConnection: close\r\n\r\n");
        break;
      }
      case 4: {  // a random method and target on a known route
        static const char* kMethods[] = {"PATCH", "OPTIONS", "TRACE", "FOO", "DELETE", "PUT"};
        check("method", std::string(kMethods[any(6)]) + " " + api + posts[any(posts.size())] +
                            " HTTP/1.1\r\nHost: fuzz\r\nContent-Length: 0\r\nConnection: "
                            "close\r\n\r\n");
        break;
      }
      default:  // not HTTP at all
        check("stream", bytes(200));
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int silent = 0;
  for (const auto& [k, n] : unanswered) silent += n;
  std::printf(
      "[ figures  ] HTTP fuzz (seed %u): %d requests in %.1f s, %d answered 4xx with the "
      "envelope, %d closed without an answer (body %d, mutated %d, target %d, header %d, "
      "method %d, stream %d)\n",
      seed, rounds + 1, secs, answered, silent, unanswered["body"], unanswered["mutated"],
      unanswered["target"], unanswered["header"], unanswered["method"], unanswered["stream"]);
  // Well-framed requests always get an answer; only a stream that happens to stop inside a
  // request line or header may end without one.
  for (const char* k : {"issue", "body", "mutated", "target", "header", "method"})
    EXPECT_EQ(unanswered[k], 0) << k;
  EXPECT_LT(unanswered["stream"], by_kind["stream"] / 10 + 1);
  // Still up and unchanged: no container, user or lease came out of any of it.
  HttpClient c(svc_->url());
  auto health = c.get("/healthz");
  EXPECT_EQ(health.status, 200) << svc_->log_tail();
  auto list = c.get(api + "/list");
  ASSERT_TRUE(ok(list)) << list.body;
  EXPECT_EQ(list.json()["data"]["total"], 0);
  EXPECT_TRUE(c.get(api + "/leases").json()["data"]["leases"].empty());
  EXPECT_EQ(svc_->log_tail().find("terminate called"), std::string::npos);
}

}  // namespace
}  // namespace gpulab::service::testing
