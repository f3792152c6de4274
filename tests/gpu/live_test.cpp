// Detection on the live machine (CI has no GPU), vendor libraries that are not there, and the
// Docker engine ping over a real socket.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/json.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "gpu/backend.h"
#include "gpu/dynlib.h"
#include "gpu/host.h"
#include "gpu/inventory.h"

using namespace gpulab;
using namespace gpulab::gpu;

namespace {

bool host_has_gpu() {
  return std::filesystem::exists("/dev/nvidiactl") || std::filesystem::exists("/dev/kfd");
}

}  // namespace

TEST(Live, NoGpuMachineIsVendorNone) {
  if (host_has_gpu()) GTEST_SKIP() << "this machine has a GPU driver loaded";
  DetectOptions o;
  o.host_checks = false;
  Inventory inv = detect(o);
  EXPECT_EQ(inv.vendor, "none");
  EXPECT_TRUE(inv.gpus.empty());
  EXPECT_NE(inv.no_gpu_reason.find("neither NVIDIA nor ROCm"), std::string::npos);
  EXPECT_EQ(to_json(inv)["vendor"], "none");
}

TEST(Live, MissingLibraryIsARecordedReason) {
  DynLib lib;
  EXPECT_FALSE(lib.open({"libgpulab-no-such-vendor.so.1", "libgpulab-no-such-vendor.so"}));
  EXPECT_FALSE(lib.loaded());
  EXPECT_NE(lib.error().find("libgpulab-no-such-vendor.so.1"), std::string::npos) << lib.error();
  EXPECT_EQ(lib.symbol({"nvmlInit_v2"}), nullptr);
}

TEST(Live, RealLibraryResolvesVersionedSymbolsInOrder) {
  DynLib lib;
  ASSERT_TRUE(lib.open({"libgpulab-no-such-vendor.so", "libc.so.6"})) << lib.error();
  EXPECT_EQ(lib.loaded_name(), "libc.so.6");
  int (*fn)(const char*) = nullptr;
  EXPECT_TRUE(lib.bind(fn, {"no_such_symbol_v2", "strlen_missing", "atoi"}));
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn("42"), 42);
}

TEST(Live, VendorLibrariesAbsentDropOutWithReason) {
  for (auto make : {make_nvml_backend, make_rocm_smi_backend}) {
    auto b = make();
    DetectOptions o;
    bool ok = b->init(o);
    if (ok) GTEST_SKIP() << b->name() << " found a device on this machine";
    EXPECT_FALSE(b->last_error().empty()) << b->name();
  }
  auto nvml = make_nvml_backend();
  if (!nvml->init({})) {
    // Either the library is missing (named in the reason) or it loaded and found no device.
    const std::string& why = nvml->last_error();
    EXPECT_TRUE(why.find("libnvidia-ml.so.1") != std::string::npos ||
                why.find("nvml") != std::string::npos || why.find("NVML") != std::string::npos)
        << why;
  }
}

TEST(Docker, UnreachableSocketIsReportedNotThrown) {
  std::string detail;
  EXPECT_FALSE(ping_docker("unix:///nonexistent/gpulab/docker.sock", detail, 500));
  EXPECT_NE(detail.find("/nonexistent/gpulab/docker.sock"), std::string::npos) << detail;
  EXPECT_FALSE(ping_docker("ssh://somewhere", detail, 500));
  EXPECT_NE(detail.find("unsupported"), std::string::npos) << detail;
}

// A real unix socket whose server answers like an engine that is not healthy: the ping must read
// the status line, not just the connect.
TEST(Docker, NonOkAnswerIsNotReachable) {
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
    char buf[256];
    ssize_t n = ::recv(c, buf, sizeof buf, 0);
    if (n > 0) request.assign(buf, static_cast<size_t>(n));
    const char* resp = "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
    ::send(c, resp, std::strlen(resp), MSG_NOSIGNAL);
    ::close(c);
  });
  std::string detail;
  bool ok = ping_docker("unix://" + path, detail, 2000);
  server.join();
  ::close(srv);
  ::unlink(path.c_str());
  EXPECT_FALSE(ok);
  EXPECT_EQ(request.rfind("GET /_ping HTTP/1.0\r\n", 0), 0u) << request;
  EXPECT_NE(detail.find("503"), std::string::npos) << detail;
}

// A real engine: one the environment names, the shared test engine, or a private one started with
// the project's dockerd harness (and stopped again) when the machine can run it.
TEST(Docker, LiveEngineAnswersPing) {
  std::vector<std::string> candidates;
  if (const char* h = std::getenv("GPULAB_TEST_DOCKER_HOST")) candidates.push_back(h);
  candidates.push_back(docker_endpoint_from_env());
  candidates.push_back("unix:///tmp/gpulab-dockerd-main/docker.sock");
  std::string endpoint, detail;
  for (const auto& c : candidates) {
    if (ping_docker(c, detail, 2000)) {
      endpoint = c;
      break;
    }
  }
  bool started = false;
  auto scripts = std::filesystem::path(GPULAB_SOURCE_DIR) / "tests/integration/dockerd";
  if (endpoint.empty() && std::filesystem::exists(scripts / "start-dockerd.sh")) {
    auto r = run_process({(scripts / "start-dockerd.sh").string(), "gpu"},
                         RunOptions{std::chrono::seconds(120), {}, {}, {}});
    if (r.ok() && r->success()) {
      endpoint = trim(r->out);
      started = r->err.find("already running") == std::string::npos;
    } else if (r.ok() && r->exit_code != 77) {
      ADD_FAILURE() << "start-dockerd.sh gpu failed: " << r->err;
    }
  }
  if (endpoint.empty()) GTEST_SKIP() << "no Docker engine here and none can be started";
  bool ok = ping_docker(endpoint, detail, 5000);
  // The CLI reports the same engine through DOCKER_HOST.
  RunOptions ro;
  ro.env_add["DOCKER_HOST"] = endpoint;
  auto cli = run_process({GPULAB_BINARY, "detect", "--json"}, ro);
  if (started) (void)run_process({(scripts / "stop-dockerd.sh").string(), "--purge", "gpu"});
  EXPECT_TRUE(ok) << endpoint << ": " << detail;
  EXPECT_EQ(detail.rfind("API ", 0), 0u) << detail;
  ASSERT_TRUE(cli.ok());
  auto j = parse_json(cli->out);
  ASSERT_TRUE(j.ok()) << cli->out;
  EXPECT_EQ((*j)["host"]["docker_endpoint"], endpoint);
  EXPECT_EQ((*j)["host"]["docker_reachable"], true);
}

TEST(HostChecks, DescribeThisMachine) {
  HostChecks h = check_host();
  EXPECT_FALSE(h.docker_endpoint.empty());
  EXPECT_EQ(h.kfd.has_value(), std::filesystem::exists("/dev/kfd"));
  if (!h.docker_reachable) {
    EXPECT_FALSE(h.docker_detail.empty());
  }
}
