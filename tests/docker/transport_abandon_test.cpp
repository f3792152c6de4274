// A call in flight to an engine that stopped answering ends when its host is marked down
// (HttpTransport::abandon_stalled_calls), instead of waiting out its own limit; a call sent
// afterwards, and a call whose answer is still streaming, are not touched. The engine is a unix
// socket peer of the test's that accepts and then stays silent (a SIGSTOPped dockerd's kernel
// still accepts) or trickles its answer.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "docker/http_transport.h"

namespace gpulab::docker {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double secs_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Accepts connections on a unix socket; each is held open in silence, or (trickle) answered
// with a 20-byte body sent one byte every 100 ms. A ping is answered at once.
class QuietPeer {
 public:
  explicit QuietPeer(bool trickle) : trickle_(trickle) {
    path_ = std::filesystem::temp_directory_path() / ("gpulab-quiet-" + std::to_string(::getpid()) +
                                                      "-" + std::to_string(trickle) + ".sock");
    std::filesystem::remove(path_);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0)
      return;
    thread_ = std::thread([this] { serve(); });
  }
  ~QuietPeer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    for (auto& t : conns_) t.join();
    ::close(fd_);
    std::filesystem::remove(path_);
  }
  std::string url() const { return "unix://" + path_.string(); }

 private:
  void serve() {
    for (int c; !stop_ && (c = ::accept(fd_, nullptr, nullptr)) >= 0;)
      conns_.emplace_back([this, c] { hold(c); });
  }
  void hold(int c) {
    char buf[4096];
    const ssize_t n = ::recv(c, buf, sizeof buf, 0);
    if (n > 0 &&
        std::string_view(buf, static_cast<size_t>(n)).find("/_ping") != std::string::npos) {
      const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK";
      (void)::send(c, ok.data(), ok.size(), MSG_NOSIGNAL);  // a busy engine still answers pings
    } else if (trickle_) {
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n";
      (void)::send(c, head.data(), head.size(), MSG_NOSIGNAL);
      for (int i = 0; i < 20 && !stop_; ++i) {
        std::this_thread::sleep_for(100ms);
        (void)::send(c, "x", 1, MSG_NOSIGNAL);
      }
    }
    while (!stop_) std::this_thread::sleep_for(50ms);
    ::close(c);
  }
  bool trickle_;
  std::filesystem::path path_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> conns_;
};

HttpRequest slow_call(std::chrono::milliseconds timeout) {
  HttpRequest r;
  r.target = "/v1.41/containers/x/stop?t=30";
  r.method = "POST";
  r.timeout = timeout;
  return r;
}

TEST(TransportAbandon, AStalledCallEndsWhenItsHostIsMarkedDownNotAtItsOwnLimit) {
  QuietPeer peer(false);
  auto t = make_curl_transport(*Endpoint::parse(peer.url()));
  const auto t0 = Clock::now();
  std::thread marker([&] {
    std::this_thread::sleep_for(1500ms);
    t->abandon_stalled_calls(1000ms);  // the host monitor's mark, after the call waited 1.5 s
  });
  auto out = t->send(slow_call(30s));
  const double took = secs_since(t0);
  marker.join();
  std::printf("a stalled call ended %.2f s after it started (its own limit: 30 s)\n", took);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, Code::kUnavailable);
  EXPECT_NE(out.error().message.find("abandoned when its host was marked down"), std::string::npos)
      << out.error().message;
  // libcurl looks at an idle transfer about once a second: the mark plus that, and slack for a
  // loaded machine; far below the 30 s the call would otherwise wait.
  EXPECT_LT(took, 1.5 + 1.0 + 2.5);
}

TEST(TransportAbandon, ACallSentAfterTheMarkKeepsItsOwnLimit) {
  QuietPeer peer(false);
  auto t = make_curl_transport(*Endpoint::parse(peer.url()));
  t->abandon_stalled_calls(100ms);
  const auto t0 = Clock::now();
  auto out = t->send(slow_call(2s));
  const double took = secs_since(t0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, Code::kTimeout) << out.error().message;
  EXPECT_GE(took, 1.9);
}

TEST(TransportAbandon, AnAnswerStillStreamingIsNotAbandoned) {
  QuietPeer peer(true);
  auto t = make_curl_transport(*Endpoint::parse(peer.url()));
  std::thread marker([&] {
    std::this_thread::sleep_for(500ms);
    t->abandon_stalled_calls(1000ms);  // a byte every 100 ms: never idle that long
  });
  auto out = t->send(slow_call(30s));
  marker.join();
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->status, 200);
  EXPECT_EQ(out->body, std::string(20, 'x'));
}

// A busy engine (its host marked for a late answer while it started many containers at once)
// answers its pings while a slow call waits its turn: the call is kept while other calls are
// answered, and abandoned once the engine answers nothing for as long as the mark's idle time.
TEST(TransportAbandon, AStalledCallWaitsOnWhileTheEngineAnswersOthers) {
  QuietPeer peer(false);
  auto t = make_curl_transport(*Endpoint::parse(peer.url()));
  const auto t0 = Clock::now();
  std::atomic<int> pings{0};
  std::thread pinger([&] {
    HttpRequest ping;
    ping.target = "/_ping";
    ping.timeout = 2s;
    while (secs_since(t0) < 3.0) {
      if (t->send(ping).ok()) ++pings;
      std::this_thread::sleep_for(200ms);
    }
  });
  std::thread marker([&] {
    std::this_thread::sleep_for(1500ms);
    t->abandon_stalled_calls(2000ms);  // host_answer_seconds' default
  });
  auto out = t->send(slow_call(30s));
  const double took = secs_since(t0);
  marker.join();
  pinger.join();
  std::printf("%d pings answered; the stalled call ended %.2f s after it started\n", pings.load(),
              took);
  ASSERT_GE(pings.load(), 5);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("abandoned when its host was marked down"), std::string::npos)
      << out.error().message;
  EXPECT_GE(took, 3.0) << "abandoned while the engine still answered its pings";
  EXPECT_LT(took, 3.0 + 2.0 + 1.0 + 2.5);  // silent for the idle time, libcurl's look, slack
}

}  // namespace
}  // namespace gpulab::docker
