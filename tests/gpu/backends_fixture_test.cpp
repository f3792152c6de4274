// Each backend's parser on each captured host tree (data-driven), and the backends that read the
// same host from different sources agreeing with each other.
#include <gtest/gtest.h>

#include <functional>

#include "fixtures.h"
#include "gpu/backend.h"

using namespace gpulab;
using namespace gpulab::gpu;
using gpulab::gpu::testing::fixture;

namespace {

struct Case {
  std::string fixture;
  std::function<std::unique_ptr<GpuBackend>()> make;
  int devices;
  std::string name;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::string> target;  // gfx target (AMD) or compute capability (NVIDIA)
  std::optional<std::string> memory_partition;
  std::optional<std::string> compute_partition;
  std::optional<std::string> driver;
  std::optional<std::string> pci0;
};

// Names the case in failure messages instead of gtest's byte dump.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.fixture << " / " << c.make()->name();
}

constexpr std::uint64_t kMi300xVram = 206158430208ull;  // 192 GiB
constexpr std::uint64_t kMiB = 1024ull * 1024;

std::vector<Case> cases() {
  return {
      {"mi300x-x2", make_amdgpu_sysfs_backend, 2, "AMD Instinct MI300X", kMi300xVram, "gfx942",
       "NPS1", "SPX", "6.8.5", "0000:05:00.0"},
      {"mi300x-x2", make_rocm_smi_cli_backend, 2, "AMD Instinct MI300X", kMi300xVram, "gfx942",
       "NPS1", "SPX", "6.8.5", "0000:05:00.0"},
      {"mi300x-nps2-cpx", make_amdgpu_sysfs_backend, 1, "AMD Instinct MI300X", kMi300xVram / 8,
       "gfx942", "NPS2", "CPX", "6.8.5", "0000:05:00.0"},
      {"h100", make_nvidia_smi_cli_backend, 1, "NVIDIA H100 80GB HBM3", 81559 * kMiB, "9.0",
       std::nullopt, std::nullopt, "550.54.15", "0000:18:00.0"},
      {"h100", make_nvidia_procfs_backend, 1, "NVIDIA H100 80GB HBM3", std::nullopt, "9.0",
       std::nullopt, std::nullopt, "550.54.15", "0000:18:00.0"},
      {"rtx4090", make_nvidia_smi_cli_backend, 1, "NVIDIA GeForce RTX 4090", 24564 * kMiB, "8.9",
       std::nullopt, std::nullopt, "535.183.01", "0000:01:00.0"},
      {"rtx4090", make_nvidia_procfs_backend, 1, "NVIDIA GeForce RTX 4090", std::nullopt, "8.9",
       std::nullopt, std::nullopt, "535.183.01", "0000:01:00.0"},
  };
}

class BackendOnFixture : public ::testing::TestWithParam<Case> {};

TEST_P(BackendOnFixture, ReadsTheCapturedHost) {
  const Case& c = GetParam();
  auto b = c.make();
  DetectOptions o;
  o.root = fixture(c.fixture);
  ASSERT_TRUE(b->init(o)) << b->name() << ": " << b->last_error();
  ASSERT_EQ(b->device_count(), c.devices);
  for (int i = 0; i < c.devices; ++i) {
    GpuInfo g = b->static_info(i);
    b->sample(i, g);
    SCOPED_TRACE(std::string(b->name()) + " device " + std::to_string(i));
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.name, c.name);
    EXPECT_EQ(g.memory_total_bytes, c.memory_total_bytes);
    EXPECT_EQ(g.vendor == Vendor::kAmd ? g.gfx_target : g.compute_capability, c.target);
    EXPECT_EQ(g.memory_partition, c.memory_partition);
    EXPECT_EQ(g.compute_partition, c.compute_partition);
    EXPECT_EQ(g.driver_version, c.driver);
    EXPECT_TRUE(g.uuid.has_value());
    if (i == 0) {
      EXPECT_EQ(g.pci_bus_id, c.pci0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BackendOnFixture, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n =
                               info.param.fixture + "_" + info.param.make()->name().data();
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// sysfs and rocm-smi describe the same two MI300X: they must agree field by field.
TEST(BackendsAgree, SysfsAndRocmSmiOnMi300x) {
  DetectOptions o;
  o.root = fixture("mi300x-x2");
  auto sysfs = make_amdgpu_sysfs_backend();
  auto cli = make_rocm_smi_cli_backend();
  ASSERT_TRUE(sysfs->init(o)) << sysfs->last_error();
  ASSERT_TRUE(cli->init(o)) << cli->last_error();
  ASSERT_EQ(sysfs->device_count(), cli->device_count());
  for (int i = 0; i < sysfs->device_count(); ++i) {
    GpuInfo a = sysfs->static_info(i), b = cli->static_info(i);
    sysfs->sample(i, a);
    cli->sample(i, b);
    EXPECT_EQ(a.pci_bus_id, b.pci_bus_id);
    EXPECT_EQ(a.uuid, b.uuid);
    EXPECT_EQ(a.memory_total_bytes, b.memory_total_bytes);
    EXPECT_EQ(a.memory_used_bytes, b.memory_used_bytes);
    EXPECT_EQ(a.temperature_c, b.temperature_c);
    EXPECT_EQ(a.power_mw, b.power_mw);
    EXPECT_EQ(a.numa_node, b.numa_node);
  }
}

TEST(BackendsAgree, ProcfsAndNvidiaSmiOnH100) {
  DetectOptions o;
  o.root = fixture("h100");
  auto procfs = make_nvidia_procfs_backend();
  auto cli = make_nvidia_smi_cli_backend();
  ASSERT_TRUE(procfs->init(o)) << procfs->last_error();
  ASSERT_TRUE(cli->init(o)) << cli->last_error();
  GpuInfo a = procfs->static_info(0), b = cli->static_info(0);
  EXPECT_EQ(a.uuid, b.uuid);
  EXPECT_EQ(a.pci_bus_id, b.pci_bus_id);
  EXPECT_EQ(a.numa_node, b.numa_node);
  EXPECT_EQ(a.architecture, b.architecture);
}

// What only the richer sources know: CU counts and XGMI links from KFD, processes and live
// metrics from nvidia-smi.
TEST(AmdgpuSysfs, KfdTopologyGivesCusAndXgmiLinks) {
  DetectOptions o;
  o.root = fixture("mi300x-x2");
  auto b = make_amdgpu_sysfs_backend();
  ASSERT_TRUE(b->init(o)) << b->last_error();
  EXPECT_EQ(b->static_info(0).compute_units, 304);  // 1216 SIMDs / 4 per CU
  EXPECT_EQ(b->static_info(0).architecture, "CDNA3");
  auto links = b->links();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].type, "xgmi");
  EXPECT_EQ(links[0].a_pci, "0000:05:00.0");
  EXPECT_EQ(links[0].b_pci, "0000:65:00.0");
  EXPECT_EQ(links[0].weight, 15);
}

TEST(AmdgpuSysfs, CpxPartitionsCountOnceWithAllTheirCus) {
  DetectOptions o;
  o.root = fixture("mi300x-nps2-cpx");
  auto b = make_amdgpu_sysfs_backend();
  ASSERT_TRUE(b->init(o)) << b->last_error();
  ASSERT_EQ(b->device_count(), 1);
  EXPECT_EQ(b->static_info(0).compute_units, 304);  // 8 partitions x 38 CUs
}

TEST(NvidiaSmi, ProcessesAndLiveMetrics) {
  DetectOptions o;
  o.root = fixture("rtx4090");
  auto b = make_nvidia_smi_cli_backend();
  ASSERT_TRUE(b->init(o)) << b->last_error();
  EXPECT_EQ(b->cuda_version(), "12.2");
  GpuInfo g = b->static_info(0);
  b->sample(0, g);
  EXPECT_EQ(g.memory_used_bytes, 2874 * kMiB);
  EXPECT_EQ(g.utilization_percent, 37.0);
  EXPECT_EQ(g.temperature_c, 52.0);
  EXPECT_EQ(g.power_mw, 118430u);
  EXPECT_EQ(g.numa_node, std::nullopt);  // -1: no NUMA affinity
  auto procs = b->processes(0);
  ASSERT_EQ(procs.size(), 3u);
  EXPECT_EQ(procs[2].pid, 48817);
  EXPECT_EQ(procs[2].name, "python3");
  EXPECT_EQ(procs[2].memory_used_bytes, 2318 * kMiB);
}

TEST(NvidiaSmi, MissingCaptureIsAReasonNotACrash) {
  DetectOptions o;
  o.root = fixture("mi300x-x2");
  auto b = make_nvidia_smi_cli_backend();
  EXPECT_FALSE(b->init(o));
  EXPECT_NE(b->last_error().find("nvidia-smi-q-x.xml"), std::string::npos) << b->last_error();
}

}  // namespace
