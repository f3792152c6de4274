// gpulab ddp's client of the service's leases: which service URLs it accepts, and that a service
// that is not there is a quick, clear error (a real closed port), not a hang.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "builder/service_lease.h"

namespace gpulab::builder {
namespace {

// A loopback port that refuses connections for as long as this object lives: bound (so no other
// process of a parallel test run can take it) but never listening.
class RefusingPort {
 public:
  RefusingPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

TEST(ServiceLease, AcceptsHttpAndHttpsUrlsOnly) {
  EXPECT_TRUE(ServiceClient::open("http://127.0.0.1:8000", "").ok());
  EXPECT_TRUE(ServiceClient::open("https://lab.example:8443/", "glt_x").ok());
  for (const char* bad : {"http://127.0.0.1:99999", "http://127.0.0.1:80x", "http://:8000",
                          "http://a/b:80", "ftp://127.0.0.1:21"}) {
    auto c = ServiceClient::open(bad, "");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.error().code, Code::kInvalidArgument) << bad;
  }
}

TEST(ServiceLease, NoServiceOnThePortIsAQuickError) {
  const RefusingPort refusing;
  const int port = refusing.port();
  ASSERT_GT(port, 0);
  auto client = ServiceClient::open("http://127.0.0.1:" + std::to_string(port), "");
  ASSERT_TRUE(client.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto health = client->health();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(health.ok());
  EXPECT_LT(s, 10.0);
  auto lease = client->lease("ddp-test", 1, true);
  EXPECT_FALSE(lease.ok());
}

// Which of a service's hosts ddp's engine is: by the engine ids /healthz gives; none when no host
// has it, several when hosts were cloned with one Docker identity (ddp then refuses to guess).
TEST(ServiceLease, HostsOfAnEngineIdInALabAndInAnOlderService) {
  ServiceHealth lab;
  lab.engine_id = "A";
  lab.hosts = {{"lab1", "A", 2}, {"lab2", "B", 4}, {"lab3", "", 2}};
  using Names = std::vector<std::string>;
  EXPECT_EQ(lab.hosts_of("B"), Names{"lab2"});
  EXPECT_EQ(lab.hosts_of("A"), Names{"lab1"});
  EXPECT_TRUE(lab.hosts_of("C").empty());
  EXPECT_TRUE(lab.hosts_of("").empty());  // ddp's engine gave no id: a down host's "" is no match
  lab.hosts[2].engine_id = "B";
  EXPECT_EQ(lab.hosts_of("B"), (Names{"lab2", "lab3"}));
  ServiceHealth older;  // one engine, no hosts list
  older.engine_id = "A";
  EXPECT_EQ(older.hosts_of("A"), Names{""});
  EXPECT_TRUE(older.hosts_of("B").empty());
}

}  // namespace
}  // namespace gpulab::builder
