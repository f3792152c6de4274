// Port bindings on a real engine: a web server inside a busybox container answers on the host
// port the engine published, and a second binding of the same host port is a conflict.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

using testing::kBusyboxImage;
using testing::unique_name;
using Cleanup = testing::ContainerCleanup;

// GET / over plain TCP; the whole answer, or "" if the connection failed.
std::string http_get(const std::string& ip, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string req = "GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

CreateSpec web_server(const std::string& name, PortBinding binding) {
  CreateSpec s;
  s.name = name;
  s.image = kBusyboxImage;
  s.cmd = {"httpd", "-f", "-p", "8080", "-h", "/var/www"};
  s.ports = {binding};
  return s;
}

TEST(Ports, PublishedPortReachesServerInside) {
  GPULAB_REQUIRE_DOCKER(client);
  std::string name = unique_name("web");
  auto id = client.create_container(web_server(name, {8080, "tcp", 0, "0.0.0.0"}));
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  Cleanup g{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  auto info = client.inspect_container(*id);
  ASSERT_TRUE(info.ok());
  int host_port = 0;
  for (const auto& p : info->ports)
    if (p.container_port == 8080 && p.host_ip == "0.0.0.0") host_port = p.host_port;
  ASSERT_GT(host_port, 0) << info->raw["NetworkSettings"]["Ports"].dump();
  std::string answer;
  for (int i = 0; i < 50 && answer.find("200") == std::string::npos; ++i) {
    answer = http_get("127.0.0.1", host_port);
    if (answer.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(answer.find(" 200 OK"), std::string::npos) << answer;
  EXPECT_NE(answer.find("gpulab busybox test image"), std::string::npos) << answer;

  // The same host port again: the engine refuses when the second container starts.
  auto id2 =
      client.create_container(web_server(unique_name("web2"), {8080, "tcp", host_port, "0.0.0.0"}));
  ASSERT_TRUE(id2.ok()) << id2.error().to_string();
  Cleanup g2{client, *id2};
  auto st = client.start_container(*id2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Code::kConflict) << st.error().to_string();
}

TEST(Ports, FixedPortOnLoopbackOnly) {
  GPULAB_REQUIRE_DOCKER(client);
  // Find a free port by binding and releasing it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);

  auto id =
      client.create_container(web_server(unique_name("loop"), {8080, "tcp", port, "127.0.0.1"}));
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  Cleanup g{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  auto info = client.inspect_container(*id);
  ASSERT_EQ(info->ports.size(), 1u);
  EXPECT_EQ(info->ports[0].host_ip, "127.0.0.1");
  EXPECT_EQ(info->ports[0].host_port, port);
  std::string answer;
  for (int i = 0; i < 50 && answer.empty(); ++i) {
    answer = http_get("127.0.0.1", port);
    if (answer.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
}

}  // namespace
}  // namespace gpulab::docker
