// The engine ping behind `gpulab detect`: a missing socket and a bad DOCKER_HOST are reported,
// not thrown; an engine that answers but is unhealthy is not reachable; a real engine is, and the
// CLI reports it through DOCKER_HOST.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/json.h"
#include "core/subprocess.h"
#include "docker/engine_probe.h"
#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

TEST(EngineProbe, UnreachableSocketIsReportedNotThrown) {
  auto ep = Endpoint::parse("unix:///nonexistent/gpulab/docker.sock");
  ASSERT_TRUE(ep.ok());
  EngineProbe p = probe_engine(*ep, std::chrono::milliseconds(500));
  EXPECT_FALSE(p.reachable);
  EXPECT_EQ(p.endpoint, "unix:///nonexistent/gpulab/docker.sock");
  EXPECT_NE(p.detail.find("/nonexistent/gpulab/docker.sock"), std::string::npos) << p.detail;
}

TEST(EngineProbe, UnsupportedDockerHostIsReported) {
  const char* old = std::getenv("DOCKER_HOST");
  std::string saved = old ? old : "";
  ::setenv("DOCKER_HOST", "ssh://somewhere", 1);
  EngineProbe p = probe_engine_from_env(std::chrono::milliseconds(500));
  if (old) {
    ::setenv("DOCKER_HOST", saved.c_str(), 1);
  } else {
    ::unsetenv("DOCKER_HOST");
  }
  EXPECT_FALSE(p.reachable);
  EXPECT_EQ(p.endpoint, "ssh://somewhere");
  EXPECT_NE(p.detail.find("unsupported"), std::string::npos) << p.detail;
}

// A real unix socket whose server answers like an engine that is not healthy: the probe must read
// the status, not just the connect.
TEST(EngineProbe, NonOkAnswerIsNotReachable) {
  std::string path = "/tmp/gpulab-ping-" + std::to_string(::getpid()) + ".sock";
  int srv = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(srv, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ::unlink(path.c_str());
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(srv, 1), 0);
  std::string request;
  std::thread server([&] {
    int c = ::accept(srv, nullptr, nullptr);
    if (c < 0) return;
    char buf[1024];
    ssize_t n = ::recv(c, buf, sizeof buf, 0);
    if (n > 0) request.assign(buf, static_cast<size_t>(n));
    const char* resp = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
    ::send(c, resp, std::strlen(resp), MSG_NOSIGNAL);
    ::close(c);
  });
  EngineProbe p = probe_engine(*Endpoint::parse("unix://" + path), std::chrono::seconds(2));
  server.join();
  ::close(srv);
  ::unlink(path.c_str());
  EXPECT_FALSE(p.reachable);
  EXPECT_EQ(request.rfind("GET /_ping HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(p.detail.find("503"), std::string::npos) << p.detail;
}

TEST(EngineProbe, LiveEngineAnswersAndDetectReportsIt) {
  GPULAB_REQUIRE_DOCKER(client);
  (void)client;
  std::string host = client_engine_->host;
  EngineProbe p = probe_engine(*Endpoint::parse(host), std::chrono::seconds(5));
  EXPECT_TRUE(p.reachable) << host << ": " << p.detail;
  EXPECT_EQ(p.detail.rfind("API ", 0), 0u) << p.detail;
  // The CLI reports the same engine through DOCKER_HOST.
  RunOptions ro;
  ro.env_add["DOCKER_HOST"] = host;
  auto cli = run_process({GPULAB_BINARY, "detect", "--json"}, ro);
  ASSERT_TRUE(cli.ok());
  auto j = parse_json(cli->out);
  ASSERT_TRUE(j.ok()) << cli->out;
  EXPECT_EQ((*j)["host"]["docker_endpoint"], host);
  EXPECT_EQ((*j)["host"]["docker_reachable"], true);
}

}  // namespace
}  // namespace gpulab::docker
