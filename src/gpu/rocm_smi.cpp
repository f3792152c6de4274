// AMD backend through the ROCm SMI library (librocm_smi64), loaded with dlopen: the few types and
// functions used are declared here, so no ROCm SDK is needed to build.
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/strings.h"
#include "gpu/backend.h"
#include "gpu/dynlib.h"
#include "gpu/known_devices.h"

namespace gpulab::gpu {

namespace {

// --- the ROCm SMI ABI we rely on (rocm_smi.h) ---
using rsmi_status_t = int;
constexpr rsmi_status_t kRsmiSuccess = 0;
constexpr int kRsmiMemTypeVram = 0;
constexpr std::uint32_t kRsmiTempTypeEdge = 0;
constexpr std::uint32_t kRsmiTempTypeJunction = 1;
constexpr int kRsmiTempCurrent = 0;
constexpr int kRsmiSwCompDriver = 0;
constexpr int kRsmiIolinkTypeXgmi = 2;
constexpr int kRsmiIolinkTypePcie = 1;

struct RsmiProcessInfo {  // rsmi_process_info_t
  std::uint32_t process_id;
  std::uint32_t pasid;
  std::uint64_t vram_usage;
  std::uint64_t sdma_usage;
  std::uint32_t cu_occupancy;
};

struct RsmiApi {
  rsmi_status_t (*init)(std::uint64_t) = nullptr;
  rsmi_status_t (*shut_down)() = nullptr;
  rsmi_status_t (*status_string)(rsmi_status_t, const char**) = nullptr;
  rsmi_status_t (*num_devices)(std::uint32_t*) = nullptr;
  rsmi_status_t (*name)(std::uint32_t, char*, size_t) = nullptr;
  rsmi_status_t (*dev_id)(std::uint32_t, std::uint16_t*) = nullptr;
  rsmi_status_t (*unique_id)(std::uint32_t, std::uint64_t*) = nullptr;
  rsmi_status_t (*pci_id)(std::uint32_t, std::uint64_t*) = nullptr;
  rsmi_status_t (*mem_total)(std::uint32_t, int, std::uint64_t*) = nullptr;
  rsmi_status_t (*mem_used)(std::uint32_t, int, std::uint64_t*) = nullptr;
  rsmi_status_t (*busy_percent)(std::uint32_t, std::uint32_t*) = nullptr;
  rsmi_status_t (*temp)(std::uint32_t, std::uint32_t, int, std::int64_t*) = nullptr;
  rsmi_status_t (*power)(std::uint32_t, std::uint64_t*, int*) = nullptr;
  rsmi_status_t (*power_ave)(std::uint32_t, std::uint32_t, std::uint64_t*) = nullptr;
  rsmi_status_t (*compute_partition)(std::uint32_t, char*, std::uint32_t) = nullptr;
  rsmi_status_t (*memory_partition)(std::uint32_t, char*, std::uint32_t) = nullptr;
  rsmi_status_t (*version_str)(int, char*, std::uint32_t) = nullptr;
  rsmi_status_t (*gfx_version)(std::uint32_t, std::uint64_t*) = nullptr;
  rsmi_status_t (*numa_node)(std::uint32_t, std::uint32_t*) = nullptr;
  rsmi_status_t (*link_type)(std::uint32_t, std::uint32_t, std::uint64_t*, int*) = nullptr;
  rsmi_status_t (*link_weight)(std::uint32_t, std::uint32_t, std::uint64_t*) = nullptr;
  rsmi_status_t (*processes)(RsmiProcessInfo*, std::uint32_t*) = nullptr;
};

// BDFID: domain in bits 63..32, bus 15..8, device 7..3, function 2..0 (rocm_smi.h).
std::string bdf_to_string(std::uint64_t bdfid) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x",
                static_cast<unsigned>((bdfid >> 32) & 0xffffffff),
                static_cast<unsigned>((bdfid >> 8) & 0xff),
                static_cast<unsigned>((bdfid >> 3) & 0x1f), static_cast<unsigned>(bdfid & 0x7));
  return buf;
}

class RocmSmiBackend : public GpuBackend {
 public:
  ~RocmSmiBackend() override {
    if (initialized_ && api_.shut_down != nullptr) api_.shut_down();
  }
  std::string_view name() const override { return "rocm_smi"; }
  Vendor vendor() const override { return Vendor::kAmd; }

  bool init(const DetectOptions& opts) override {
    if (!opts.root.empty()) return fail("skipped: reading a captured tree");
    if (!lib_.open({"librocm_smi64.so", "librocm_smi64.so.7", "librocm_smi64.so.6",
                    "librocm_smi64.so.5", "librocm_smi64.so.1",
                    "/opt/rocm/lib/librocm_smi64.so"})) {
      return fail(lib_.error());
    }
    bool ok = lib_.bind(api_.init, {"rsmi_init"}) &&
              lib_.bind(api_.shut_down, {"rsmi_shut_down"}) &&
              lib_.bind(api_.num_devices, {"rsmi_num_monitor_devices"});
    if (!ok) return fail(lib_.loaded_name() + " lacks rsmi_init/rsmi_num_monitor_devices");
    lib_.bind(api_.status_string, {"rsmi_status_string"});
    lib_.bind(api_.name, {"rsmi_dev_name_get"});
    lib_.bind(api_.dev_id, {"rsmi_dev_id_get"});
    lib_.bind(api_.unique_id, {"rsmi_dev_unique_id_get"});
    lib_.bind(api_.pci_id, {"rsmi_dev_pci_id_get"});
    lib_.bind(api_.mem_total, {"rsmi_dev_memory_total_get"});
    lib_.bind(api_.mem_used, {"rsmi_dev_memory_usage_get"});
    lib_.bind(api_.busy_percent, {"rsmi_dev_busy_percent_get"});
    lib_.bind(api_.temp, {"rsmi_dev_temp_metric_get"});
    lib_.bind(api_.power, {"rsmi_dev_power_get"});
    lib_.bind(api_.power_ave, {"rsmi_dev_power_ave_get"});
    lib_.bind(api_.compute_partition, {"rsmi_dev_compute_partition_get"});
    lib_.bind(api_.memory_partition, {"rsmi_dev_memory_partition_get"});
    lib_.bind(api_.version_str, {"rsmi_version_str_get"});
    lib_.bind(api_.gfx_version, {"rsmi_dev_target_graphics_version_get"});
    lib_.bind(api_.numa_node, {"rsmi_topo_get_numa_node_number"});
    lib_.bind(api_.link_type, {"rsmi_topo_get_link_type"});
    lib_.bind(api_.link_weight, {"rsmi_topo_get_link_weight"});
    lib_.bind(api_.processes, {"rsmi_compute_process_info_get"});

    rsmi_status_t rc = api_.init(0);
    if (rc != kRsmiSuccess) return fail("rsmi_init failed: " + describe(rc));
    initialized_ = true;
    rc = api_.num_devices(&count_);
    if (rc != kRsmiSuccess) return fail("rsmi_num_monitor_devices failed: " + describe(rc));
    if (count_ == 0) return fail("ROCm SMI reports no device");
    return true;
  }

  int device_count() const override { return static_cast<int>(count_); }

  GpuInfo static_info(int i) const override {
    auto d = static_cast<std::uint32_t>(i);
    GpuInfo g;
    g.vendor = Vendor::kAmd;
    g.index = i;
    g.source = "rocm_smi";
    char buf[256] = {};
    if (api_.name != nullptr && api_.name(d, buf, sizeof buf) == kRsmiSuccess) g.name = buf;
    std::uint16_t did = 0;
    if ((g.name.empty() || starts_with(g.name, "0x")) && api_.dev_id != nullptr &&
        api_.dev_id(d, &did) == kRsmiSuccess) {
      g.name = amd_name_for_device_id(did).value_or(g.name);
    }
    std::uint64_t v = 0;
    if (api_.unique_id != nullptr && api_.unique_id(d, &v) == kRsmiSuccess) {
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
      g.uuid = std::string(buf);
    }
    if (api_.pci_id != nullptr && api_.pci_id(d, &v) == kRsmiSuccess)
      g.pci_bus_id = bdf_to_string(v);
    if (api_.mem_total != nullptr && api_.mem_total(d, kRsmiMemTypeVram, &v) == kRsmiSuccess)
      g.memory_total_bytes = v;
    // The library already turns KFD's 90402 into 942; it cuts "90a" to 90, so a two-digit answer
    // is left for the sysfs backend to fill in.
    if (api_.gfx_version != nullptr && api_.gfx_version(d, &v) == kRsmiSuccess && v >= 100 &&
        v != ~std::uint64_t{0}) {
      g.gfx_target = "gfx" + std::to_string(v);
      g.architecture = amd_architecture(*g.gfx_target);
    }
    if (api_.compute_partition != nullptr &&
        api_.compute_partition(d, buf, sizeof buf) == kRsmiSuccess && buf[0] != '\0')
      g.compute_partition = to_upper(trim(buf));
    if (api_.memory_partition != nullptr &&
        api_.memory_partition(d, buf, sizeof buf) == kRsmiSuccess && buf[0] != '\0')
      g.memory_partition = to_upper(trim(buf));
    if (api_.version_str != nullptr &&
        api_.version_str(kRsmiSwCompDriver, buf, sizeof buf) == kRsmiSuccess)
      g.driver_version = std::string(buf);
    std::uint32_t numa = 0;
    if (api_.numa_node != nullptr && api_.numa_node(d, &numa) == kRsmiSuccess)
      g.numa_node = static_cast<int>(numa);
    return g;
  }

  void sample(int i, GpuInfo& g) const override {
    auto d = static_cast<std::uint32_t>(i);
    std::uint64_t v = 0;
    if (api_.mem_used != nullptr && api_.mem_used(d, kRsmiMemTypeVram, &v) == kRsmiSuccess)
      g.memory_used_bytes = v;
    std::uint32_t busy = 0;
    if (api_.busy_percent != nullptr && api_.busy_percent(d, &busy) == kRsmiSuccess)
      g.utilization_percent = busy;
    // MI300 has no edge sensor; junction is what rocm-smi shows for it.
    std::int64_t milli = 0;
    if (api_.temp != nullptr &&
        (api_.temp(d, kRsmiTempTypeJunction, kRsmiTempCurrent, &milli) == kRsmiSuccess ||
         api_.temp(d, kRsmiTempTypeEdge, kRsmiTempCurrent, &milli) == kRsmiSuccess))
      g.temperature_c = static_cast<double>(milli) / 1000.0;
    int type = 0;
    if (api_.power != nullptr && api_.power(d, &v, &type) == kRsmiSuccess) {
      g.power_mw = v / 1000;  // microwatts
    } else if (api_.power_ave != nullptr && api_.power_ave(d, 0, &v) == kRsmiSuccess) {
      g.power_mw = v / 1000;
    }
  }

  std::vector<GpuProcess> processes(int i) const override {
    // ROCm SMI lists processes per system, not per device; report them on device 0 only.
    std::vector<GpuProcess> out;
    if (i != 0 || api_.processes == nullptr) return out;
    std::vector<RsmiProcessInfo> infos(256);
    auto n = static_cast<std::uint32_t>(infos.size());
    if (api_.processes(infos.data(), &n) != kRsmiSuccess) return out;
    for (std::uint32_t k = 0; k < n && k < infos.size(); ++k) {
      GpuProcess p;
      p.pid = static_cast<int>(infos[k].process_id);
      p.memory_used_bytes = infos[k].vram_usage;
      out.push_back(std::move(p));
    }
    return out;
  }

  std::vector<PciLink> links() const override {
    std::vector<PciLink> out;
    if (api_.link_type == nullptr || api_.pci_id == nullptr) return out;
    for (std::uint32_t a = 0; a < count_; ++a) {
      for (std::uint32_t b = a + 1; b < count_; ++b) {
        std::uint64_t hops = 0, pa = 0, pb = 0, weight = 0;
        int type = 0;
        if (api_.link_type(a, b, &hops, &type) != kRsmiSuccess) continue;
        if (api_.pci_id(a, &pa) != kRsmiSuccess || api_.pci_id(b, &pb) != kRsmiSuccess) continue;
        PciLink l{bdf_to_string(pa),
                  bdf_to_string(pb),
                  type == kRsmiIolinkTypeXgmi   ? "xgmi"
                  : type == kRsmiIolinkTypePcie ? "pcie"
                                                : "unknown",
                  std::nullopt,
                  static_cast<int>(hops),
                  std::nullopt};
        if (api_.link_weight != nullptr && api_.link_weight(a, b, &weight) == kRsmiSuccess)
          l.weight = static_cast<int>(weight);
        out.push_back(std::move(l));
      }
    }
    return out;
  }

 private:
  std::string describe(rsmi_status_t rc) const {
    const char* s = nullptr;
    if (api_.status_string != nullptr && api_.status_string(rc, &s) == kRsmiSuccess && s != nullptr)
      return s;
    return "ROCm SMI error " + std::to_string(rc);
  }

  DynLib lib_;
  RsmiApi api_;
  bool initialized_ = false;
  std::uint32_t count_ = 0;
};

}  // namespace

std::unique_ptr<GpuBackend> make_rocm_smi_backend() {
  return std::make_unique<RocmSmiBackend>();
}

}  // namespace gpulab::gpu
