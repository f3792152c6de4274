// Engine-level calls against a real dockerd: API version negotiation, ping, info, and the error
// a user gets when no engine is there.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

int rank(const std::string& v) {
  auto dot = v.find('.');
  return std::stoi(v.substr(0, dot)) * 1000 + std::stoi(v.substr(dot + 1));
}

TEST(Engine, NegotiatesMinOfServerAndOurVersion) {
  GPULAB_REQUIRE_DOCKER(client);
  auto v = client.version();
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_FALSE(v->version.empty());
  int expect = std::min(rank(v->api_version), rank(kMaxApiVersion));
  EXPECT_EQ(rank(client.api_version()), expect)
      << "server " << v->api_version << ", ours " << kMaxApiVersion << ", used "
      << client.api_version();
  // A client pinned to an older version talks to the engine under that prefix.
  Client old(std::shared_ptr<HttpTransport>(
                 make_curl_transport(*Endpoint::parse(client.transport().describe()))),
             "1.30");
  auto info = old.info();
  ASSERT_TRUE(info.ok()) << info.error().to_string();
}

TEST(Engine, PingAndInfo) {
  GPULAB_REQUIRE_DOCKER(client);
  ASSERT_TRUE(client.ping().ok());
  auto info = client.info();
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_GT(info->ncpu, 0);
  EXPECT_GT(info->mem_total_bytes, 0);
  EXPECT_FALSE(info->storage_driver.empty());
  EXPECT_NE(std::find(info->runtimes.begin(), info->runtimes.end(), "runc"), info->runtimes.end());
  EXPECT_NE(client.describe().find(client.api_version()), std::string::npos);
}

TEST(Engine, UnreachableUnixSocketSaysStartDockerd) {
  auto ep = Endpoint::parse("unix:///tmp/gpulab-no-such-engine/docker.sock");
  ASSERT_TRUE(ep.ok());
  auto c = Client::connect(*ep);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, Code::kUnavailable);
  EXPECT_NE(c.error().message.find("/tmp/gpulab-no-such-engine/docker.sock"), std::string::npos)
      << c.error().message;
  EXPECT_NE(c.error().hint.find("start dockerd"), std::string::npos) << c.error().hint;
}

TEST(Engine, UnreachableTcpPortIsUnavailableAndNamesTheRemoteEngine) {
  // Bind a port and close it again: nothing listens there afterwards.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  auto c = Client::connect(*Endpoint::parse("tcp://127.0.0.1:" + std::to_string(port)));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, Code::kUnavailable);
  // A remote engine is not started here: the hint names its machine and port, not DOCKER_HOST.
  EXPECT_NE(
      c.error().hint.find("dockerd on 127.0.0.1 runs and listens on port " + std::to_string(port)),
      std::string::npos)
      << c.error().hint;
  EXPECT_EQ(c.error().hint.find("DOCKER_HOST"), std::string::npos) << c.error().hint;
}

TEST(Endpoint, ParsesDockerHostForms) {
  auto u = Endpoint::parse("unix:///run/x.sock");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(u->socket_path, "/run/x.sock");
  EXPECT_EQ(u->to_string(), "unix:///run/x.sock");
  auto t = Endpoint::parse("tcp://10.0.0.5:2376");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(t->host, "10.0.0.5");
  EXPECT_EQ(t->port, 2376);
  EXPECT_EQ(Endpoint::parse("").value().socket_path, "/var/run/docker.sock");
  for (const char* bad : {"tcp://host:99999", "tcp://:2375", "ftp://x", "unix://relative"})
    EXPECT_EQ(Endpoint::parse(bad).error().code, Code::kInvalidArgument) << bad;
}

TEST(Endpoint, FromEnvReadsDockerHost) {
  ::setenv("DOCKER_HOST", "unix:///tmp/elsewhere.sock", 1);
  auto ep = Endpoint::from_env();
  ::unsetenv("DOCKER_HOST");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->socket_path, "/tmp/elsewhere.sock");
}

TEST(Errors, StatusesMapToCodes) {
  EXPECT_EQ(error_from_response(404, R"({"message":"No such container: x"})", "inspect").code,
            Code::kNotFound);
  auto e = error_from_response(
      409, R"({"message":"Conflict. The container name \"/a\" is already in use"})", "create");
  EXPECT_EQ(e.code, Code::kAlreadyExists);
  EXPECT_EQ(e.message, "create: Conflict. The container name \"/a\" is already in use");
  EXPECT_EQ(error_from_response(409, R"({"message":"container is running: stop it"})", "rm").code,
            Code::kConflict);
  EXPECT_EQ(
      error_from_response(
          500, R"({"message":"Bind for 0.0.0.0:80 failed: port is already allocated"})", "start")
          .code,
      Code::kConflict);
  EXPECT_EQ(
      error_from_response(
          500,
          R"({"message":"could not select device driver \"nvidia\" with capabilities: [[gpu]]"})",
          "start")
          .code,
      Code::kUnavailable);
  auto removing = error_from_response(
      500, R"({"message":"container is marked for removal and cannot be started"})", "start");
  EXPECT_EQ(removing.code, Code::kConflict);
  EXPECT_NE(removing.hint.find("try again"), std::string::npos);
  EXPECT_EQ(error_from_response(400, "plain text", "x").message, "x: plain text");
}

}  // namespace
}  // namespace gpulab::docker
