// Detection on the live machine (CI has no GPU), vendor libraries that are not there, and the
// host checks (the Docker engine's state comes from a probe the caller passes in).
#include <gtest/gtest.h>

#include <filesystem>

#include "gpu/backend.h"
#include "gpu/detect.h"
#include "gpu/dynlib.h"
#include "gpu/host.h"

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

TEST(HostChecks, DescribeThisMachine) {
  HostChecks h = check_host();
  EXPECT_FALSE(h.docker_endpoint.empty());
  EXPECT_EQ(h.kfd.has_value(), std::filesystem::exists("/dev/kfd"));
  // gpu speaks no HTTP: without a probe the engine is not checked, and says so.
  EXPECT_FALSE(h.docker_reachable.has_value());
  EXPECT_NE(h.docker_detail.find("not checked"), std::string::npos) << h.docker_detail;
}

TEST(HostChecks, EngineStateComesFromTheProbe) {
  int calls = 0;
  HostChecks h = check_host([&] {
    ++calls;
    return DockerStatus{"tcp://engine:2375", true, "API 1.41"};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(h.docker_endpoint, "tcp://engine:2375");
  EXPECT_EQ(h.docker_reachable, true);
  EXPECT_EQ(h.docker_detail, "API 1.41");
}
