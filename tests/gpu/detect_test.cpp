// detect() over whole captured trees: which backend answers, what the later ones add, the vendor
// summary, the topology and the JSON form.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "gpu/detect.h"

using namespace gpulab;
using namespace gpulab::gpu;
using gpulab::gpu::testing::fixture;

namespace {

Inventory detect_fixture(const std::string& name) {
  DetectOptions o;
  o.root = fixture(name);
  return detect(o);
}

const BackendReport* report(const Inventory& inv, const std::string& name) {
  for (const auto& b : inv.backends) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace

TEST(Detect, Mi300xHostMergesSysfsAndRocmSmi) {
  Inventory inv = detect_fixture("mi300x-x2");
  EXPECT_EQ(inv.vendor, "amd");
  ASSERT_EQ(inv.gpus.size(), 2u);
  for (const auto& g : inv.gpus) {
    EXPECT_EQ(g.name, "AMD Instinct MI300X");
    EXPECT_EQ(g.memory_total_bytes, 206158430208ull);
    EXPECT_EQ(g.gfx_target, "gfx942");
    EXPECT_EQ(g.memory_partition, "NPS1");
    EXPECT_EQ(g.compute_partition, "SPX");
  }
  EXPECT_EQ(inv.gpus[1].index, 1);
  EXPECT_EQ(inv.rocm_version, "6.2.0-66");
  ASSERT_EQ(inv.links.size(), 1u);
  EXPECT_EQ(inv.links[0].a, 0);
  EXPECT_EQ(inv.links[0].b, 1);
  EXPECT_EQ(inv.links[0].type, "xgmi");
  ASSERT_NE(report(inv, "amdgpu_sysfs"), nullptr);
  EXPECT_EQ(report(inv, "amdgpu_sysfs")->status, "used");
  EXPECT_EQ(report(inv, "rocm_smi_cli")->status, "merged");
  // A captured tree never touches the vendor libraries or the live host.
  EXPECT_EQ(report(inv, "nvml")->status, "skipped");
  EXPECT_EQ(report(inv, "rocm_smi")->status, "skipped");
  EXPECT_FALSE(inv.host.has_value());
}

TEST(Detect, H100HostFillsMemoryFromNvidiaSmi) {
  Inventory inv = detect_fixture("h100");
  EXPECT_EQ(inv.vendor, "nvidia");
  ASSERT_EQ(inv.gpus.size(), 1u);
  const GpuInfo& g = inv.gpus[0];
  EXPECT_EQ(g.source, "nvidia_procfs");
  EXPECT_EQ(g.compute_capability, "9.0");
  EXPECT_EQ(g.architecture, "Hopper");
  // procfs has no memory figures; the nvidia-smi capture adds them.
  EXPECT_EQ(g.memory_total_bytes, 81559ull * 1024 * 1024);
  EXPECT_EQ(g.power_mw, 71160u);
  EXPECT_EQ(inv.cuda_version, "12.4");
  EXPECT_EQ(report(inv, "nvidia_smi")->status, "merged");
  EXPECT_EQ(report(inv, "amdgpu_sysfs")->status, "unavailable");
}

TEST(Detect, BothVendorsMakeAMixedHost) {
  Inventory inv = detect_fixture("mixed");
  EXPECT_EQ(inv.vendor, "mixed");
  ASSERT_EQ(inv.gpus.size(), 3u);
  EXPECT_EQ(inv.gpus[0].vendor, Vendor::kNvidia);
  EXPECT_EQ(inv.gpus[1].vendor, Vendor::kAmd);
  EXPECT_EQ(inv.gpus[2].index, 1);  // indexes count per vendor, as CUDA/HIP number them
  ASSERT_EQ(inv.links.size(), 1u);
  EXPECT_EQ(inv.links[0].vendor, Vendor::kAmd);
}

TEST(Detect, EmptyTreeIsNoGpuWithReasons) {
  auto dir =
      std::filesystem::temp_directory_path() / ("gpulab-empty-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  DetectOptions o;
  o.root = dir;
  Inventory inv = detect(o);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(inv.vendor, "none");
  EXPECT_TRUE(inv.gpus.empty());
  EXPECT_FALSE(inv.no_gpu_reason.empty());
  for (const auto& b : inv.backends) {
    EXPECT_NE(b.status, "used") << b.name;
    EXPECT_FALSE(b.reason.empty()) << b.name;
  }
}

TEST(DetectJson, EveryMetricKeyPresentNullWhenUnknown) {
  OrderedJson j = to_json(detect_fixture("h100"));
  EXPECT_EQ(j["vendor"], "nvidia");
  EXPECT_EQ(j["gpu_count"], 1);
  const auto& g = j["gpus"][0];
  for (const char* key : {"index", "name", "uuid", "pci_bus_id", "compute_capability", "gfx_target",
                          "memory_total_bytes", "memory_used_bytes", "utilization_percent",
                          "temperature_c", "power_mw", "numa_node", "driver_version"}) {
    EXPECT_TRUE(g.contains(key)) << key;
  }
  EXPECT_TRUE(g["gfx_target"].is_null());
  EXPECT_EQ(g["compute_capability"], "9.0");
  EXPECT_EQ(g["memory_total_bytes"], 81559ull * 1024 * 1024);
  EXPECT_TRUE(j["host"].is_null());
  EXPECT_FALSE(j.contains("reason"));
}
