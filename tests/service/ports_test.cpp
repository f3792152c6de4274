// SSH port sequence of the seed, bind probes against a real listening socket, conflict message.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/domain/port_allocator.h"

namespace gpulab::service {
namespace {

// Listens on an ephemeral port; returns {fd, port}.
std::pair<int, int> listen_somewhere() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return {fd, ntohs(a.sin_port)};
}

TEST(Ports, SeedSequence) {
  auto always = [](int) { return true; };
  EXPECT_EQ(next_ssh_port(2200, 11, {}, always), 2211);
  EXPECT_EQ(next_ssh_port(2200, 11, {2211}, always), 2222);
  EXPECT_EQ(next_ssh_port(3300, 11, {}, always), 3311);
  EXPECT_EQ(next_ssh_port(3300, 11, {3311}, always), 3322);
  EXPECT_EQ(next_ssh_port(65530, 11, {}, always), std::nullopt);
}

TEST(Ports, ListenerOnLoopbackMakesPortUnavailable) {
  auto [fd, port] = listen_somewhere();
  EXPECT_FALSE(host_port_bindable(port));
  EXPECT_EQ(taken_ports({port}, {}), std::vector<int>{port});
  // The SSH sequence skips a port some process listens on.
  int base = port - 11;
  auto next = next_ssh_port(base, 11, {});
  ASSERT_TRUE(next);
  EXPECT_NE(*next, port);
  ::close(fd);
  EXPECT_TRUE(host_port_bindable(port));
}

TEST(Ports, HeldAndRestingPortsAreTaken) {
  auto never_bound = [](int) { return true; };
  EXPECT_EQ(taken_ports({3002, 4002, 5002}, {3002, 4002}, never_bound),
            (std::vector<int>{3002, 4002}));
  EXPECT_TRUE(taken_ports({5002}, {3002}, never_bound).empty());
}

TEST(Ports, ConflictMessageMatchesSeed) {
  EXPECT_EQ(port_conflict_message({3002, 4002}), "Port(s) already in use: [3002, 4002]");
}

TEST(Ports, OutOfRangeIsNeverBindable) {
  EXPECT_FALSE(host_port_bindable(0));
  EXPECT_FALSE(host_port_bindable(70000));
}

}  // namespace
}  // namespace gpulab::service
