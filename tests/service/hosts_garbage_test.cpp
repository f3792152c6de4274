// A host that answers with garbage is marked down with the reason and hurts nobody else: four
// fake peers on loopback, listed as hosts beside the real lab1, answer every connection with
// bytes that are not HTTP, with a truncated JSON body, or with a 2 GB body (a 200, and a 500)
// streamed until the client hangs up. Each is down with a reason that says so, lab1 serves creates
// meanwhile, and the service (whose answers from an engine are capped at 64 MiB) is still alive
// after a few rounds of the host monitor asking them again.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

// A TCP peer on 127.0.0.1 that answers each connection's first request with `reply` (then, for
// `endless`, zeros until the client hangs up) and closes it.
class FakePeer {
 public:
  FakePeer(std::string reply, bool endless) : reply_(std::move(reply)), endless_(endless) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 16) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakePeer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int served() const { return served_.load(); }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)::recv(c, buf, sizeof buf, 0);  // the request's head: its contents do not matter
      bool open = ::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL) >= 0;
      const std::string zeros(1 << 20, '0');
      while (open && endless_ && !stop_)
        open = ::send(c, zeros.data(), zeros.size(), MSG_NOSIGNAL) >= 0;
      ::close(c);
      ++served_;
    }
  }
  std::string reply_;
  bool endless_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

class ServiceHostsGarbage : public LabHostsTest {};

TEST_F(ServiceHostsGarbage, HostsAnsweringGarbageAreDownWithTheReasonAndHurtNobody) {
  FakePeer not_http("SSH-2.0-OpenSSH_9.2 this is not HTTP\r\n\r\n", false);
  FakePeer truncated(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n"
      "{\"ApiVersion\": \"1.4",
      false);
  FakePeer huge(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n",
      true);
  FakePeer huge_error(
      "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
      "Content-Length: 2147483648\r\n\r\n",
      true);
  ASSERT_GT(huge_error.port(), 0);
  ASSERT_GT(not_http.port(), 0);
  ASSERT_GT(truncated.port(), 0);
  ASSERT_GT(huge.port(), 0);
  Json cfg = lab_config();
  Json hosts = Json::array({host_json(0, 2)});
  for (const auto& [name, peer] :
       std::vector<std::pair<std::string, const FakePeer*>>{{"nothttp", &not_http},
                                                            {"truncated", &truncated},
                                                            {"huge", &huge},
                                                            {"hugeerror", &huge_error}})
    hosts.push_back({{"name", name},
                     {"url", "tcp://127.0.0.1:" + std::to_string(peer->port())},
                     {"insecure", true}});
  cfg["hosts"] = hosts;
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  // A few rounds of the host monitor (host_check_seconds 1) asking each again.
  const auto t0 = std::chrono::steady_clock::now();
  while (huge.served() < 3 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_GE(huge.served(), 3);
  EXPECT_EQ(host_state(c, "lab1")["state"], "up");
  const std::vector<std::pair<std::string, std::string>> reasons = {
      {"nothttp", "tcp://127.0.0.1:" + std::to_string(not_http.port())},
      {"truncated", "tcp://127.0.0.1:" + std::to_string(truncated.port())},
      {"huge", "more than 64 MiB"},
      {"hugeerror", "larger than 64 MiB (HTTP 500)"}};
  for (const auto& [name, part] : reasons) {
    auto h = host_state(c, name);
    std::printf("garbage: %s down: %s\n", name.c_str(), h.value("down_reason", "").c_str());
    EXPECT_EQ(h["state"], "down") << h.dump();
    EXPECT_NE(h.value("down_reason", "").find(part), std::string::npos) << h.dump();
  }
  auto made = create(c, "fine", 1);
  ASSERT_TRUE(ok(made)) << made.body;
  EXPECT_EQ(made.json()["data"]["host"], "lab1");
  auto bad = create(c, "there", 0, "huge");
  EXPECT_EQ(bad.status, 503) << bad.body;
  EXPECT_EQ(c.get("/healthz").status, 200);  // alive after them all
}

}  // namespace
}  // namespace gpulab::service::testing
