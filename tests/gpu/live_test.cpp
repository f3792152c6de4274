// Detection on the live machine (CI has no GPU), vendor libraries that are not there, and the
// Docker engine ping over a real socket.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

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

TEST(Docker, LiveEngineAnswersPing) {
  std::string endpoint = docker_endpoint_from_env();
  std::string detail;
  if (!ping_docker(endpoint, detail, 2000))
    GTEST_SKIP() << "no Docker engine at " << endpoint << ": " << detail;
  SUCCEED() << detail;
}

TEST(HostChecks, DescribeThisMachine) {
  HostChecks h = check_host();
  EXPECT_FALSE(h.docker_endpoint.empty());
  EXPECT_EQ(h.kfd.has_value(), std::filesystem::exists("/dev/kfd"));
  if (!h.docker_reachable) {
    EXPECT_FALSE(h.docker_detail.empty());
  }
}
