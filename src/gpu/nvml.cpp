// NVIDIA backend through NVML, loaded with dlopen so no CUDA SDK is needed to build: the few NVML
// types and functions used are declared here, with their versioned symbol names.
#include <fstream>
#include <string>

#include "core/files.h"
#include "core/strings.h"
#include "gpu/backend.h"
#include "gpu/dynlib.h"
#include "gpu/known_devices.h"

namespace gpulab::gpu {

namespace {

// --- the NVML ABI we rely on (from nvml.h; stable since R450). The structs mirror nvmlMemory_t,
// nvmlUtilization_t, nvmlPciInfo_t and nvmlProcessInfo_v2_t field for field. ---
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr unsigned kNvmlTemperatureGpu = 0;
constexpr unsigned kNvlinkMaxLinks = 18;
constexpr int kNvmlFeatureEnabled = 1;

struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlPciInfo {  // the _v3 layout
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct NvmlProcessInfoV2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct NvmlApi {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*cuda_driver_version)(int*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*memory_info)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*compute_capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, NvmlProcessInfoV2*) = nullptr;
};

class NvmlBackend : public GpuBackend {
 public:
  ~NvmlBackend() override {
    if (initialized_ && api_.shutdown != nullptr) api_.shutdown();
  }
  std::string_view name() const override { return "nvml"; }
  Vendor vendor() const override { return Vendor::kNvidia; }

  bool init(const DetectOptions& opts) override {
    if (!opts.root.empty()) return fail("skipped: reading a captured tree");
    if (!lib_.open({"libnvidia-ml.so.1", "libnvidia-ml.so"})) return fail(lib_.error());
    bool ok = lib_.bind(api_.init, {"nvmlInit_v2", "nvmlInit"}) &&
              lib_.bind(api_.shutdown, {"nvmlShutdown"}) &&
              lib_.bind(api_.device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}) &&
              lib_.bind(api_.handle_by_index,
                        {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
    if (!ok) return fail(lib_.loaded_name() + " lacks nvmlInit/nvmlDeviceGetCount");
    // Everything else is optional: an old driver simply reports fewer fields.
    lib_.bind(api_.error_string, {"nvmlErrorString"});
    lib_.bind(api_.driver_version, {"nvmlSystemGetDriverVersion"});
    lib_.bind(api_.cuda_driver_version,
              {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
    lib_.bind(api_.name, {"nvmlDeviceGetName"});
    lib_.bind(api_.uuid, {"nvmlDeviceGetUUID"});
    lib_.bind(api_.pci_info, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"});
    lib_.bind(api_.memory_info, {"nvmlDeviceGetMemoryInfo"});
    lib_.bind(api_.utilization, {"nvmlDeviceGetUtilizationRates"});
    lib_.bind(api_.temperature, {"nvmlDeviceGetTemperature"});
    lib_.bind(api_.power_usage, {"nvmlDeviceGetPowerUsage"});
    lib_.bind(api_.compute_capability, {"nvmlDeviceGetCudaComputeCapability"});
    lib_.bind(api_.nvlink_state, {"nvmlDeviceGetNvLinkState"});
    lib_.bind(api_.nvlink_remote_pci,
              {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"});
    lib_.bind(api_.processes, {"nvmlDeviceGetComputeRunningProcesses_v2"});

    nvmlReturn_t rc = api_.init();
    if (rc != kNvmlSuccess) return fail("nvmlInit failed: " + describe(rc));
    initialized_ = true;
    unsigned n = 0;
    rc = api_.device_count(&n);
    if (rc != kNvmlSuccess) return fail("nvmlDeviceGetCount failed: " + describe(rc));
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      if (api_.handle_by_index(i, &d) == kNvmlSuccess) devices_.push_back(d);
    }
    if (devices_.empty()) return fail("NVML reports no device");
    return true;
  }

  int device_count() const override { return static_cast<int>(devices_.size()); }

  GpuInfo static_info(int i) const override {
    nvmlDevice_t d = devices_.at(static_cast<size_t>(i));
    GpuInfo g;
    g.vendor = Vendor::kNvidia;
    g.index = i;
    g.source = "nvml";
    char buf[256] = {};
    if (api_.name != nullptr && api_.name(d, buf, sizeof buf) == kNvmlSuccess) g.name = buf;
    if (api_.uuid != nullptr && api_.uuid(d, buf, sizeof buf) == kNvmlSuccess) g.uuid = buf;
    if (api_.pci_info != nullptr) {
      NvmlPciInfo pci{};
      if (api_.pci_info(d, &pci) == kNvmlSuccess) g.pci_bus_id = normalize_pci_bus_id(pci.busId);
    }
    if (api_.driver_version != nullptr && api_.driver_version(buf, sizeof buf) == kNvmlSuccess)
      g.driver_version = std::string(buf);
    NvmlMemory mem{};
    if (api_.memory_info != nullptr && api_.memory_info(d, &mem) == kNvmlSuccess)
      g.memory_total_bytes = mem.total;
    int major = 0, minor = 0;
    if (api_.compute_capability != nullptr &&
        api_.compute_capability(d, &major, &minor) == kNvmlSuccess) {
      g.compute_capability = std::to_string(major) + "." + std::to_string(minor);
      g.architecture = nvidia_architecture(*g.compute_capability);
    }
    if (g.pci_bus_id) {
      // NVML has no NUMA call before R535; the kernel's PCI entry always knows.
      if (auto numa = read_text("/sys/bus/pci/devices/" + *g.pci_bus_id + "/numa_node")) {
        if (auto v = leading_number(*numa); v && *v >= 0) g.numa_node = static_cast<int>(*v);
      }
    }
    return g;
  }

  void sample(int i, GpuInfo& g) const override {
    nvmlDevice_t d = devices_.at(static_cast<size_t>(i));
    NvmlMemory mem{};
    if (api_.memory_info != nullptr && api_.memory_info(d, &mem) == kNvmlSuccess)
      g.memory_used_bytes = mem.used;
    NvmlUtilization util{};
    if (api_.utilization != nullptr && api_.utilization(d, &util) == kNvmlSuccess)
      g.utilization_percent = util.gpu;
    unsigned t = 0;
    if (api_.temperature != nullptr && api_.temperature(d, kNvmlTemperatureGpu, &t) == kNvmlSuccess)
      g.temperature_c = t;
    unsigned mw = 0;
    if (api_.power_usage != nullptr && api_.power_usage(d, &mw) == kNvmlSuccess) g.power_mw = mw;
  }

  std::vector<GpuProcess> processes(int i) const override {
    std::vector<GpuProcess> out;
    if (api_.processes == nullptr) return out;
    nvmlDevice_t d = devices_.at(static_cast<size_t>(i));
    std::vector<NvmlProcessInfoV2> infos(64);
    unsigned n = static_cast<unsigned>(infos.size());
    if (api_.processes(d, &n, infos.data()) != kNvmlSuccess) return out;
    for (unsigned k = 0; k < n && k < infos.size(); ++k) {
      GpuProcess p;
      p.pid = static_cast<int>(infos[k].pid);
      p.name = read_text("/proc/" + std::to_string(p.pid) + "/comm").value_or("");
      // NVML reports "not available" as all ones (no permission, or a MIG device).
      if (infos[k].usedGpuMemory != ~0ull) p.memory_used_bytes = infos[k].usedGpuMemory;
      out.push_back(std::move(p));
    }
    return out;
  }

  std::vector<PciLink> links() const override {
    std::vector<PciLink> out;
    if (api_.nvlink_state == nullptr || api_.nvlink_remote_pci == nullptr ||
        api_.pci_info == nullptr)
      return out;
    for (nvmlDevice_t d : devices_) {
      NvmlPciInfo self{};
      if (api_.pci_info(d, &self) != kNvmlSuccess) continue;
      auto self_id = normalize_pci_bus_id(self.busId);
      if (!self_id) continue;
      for (unsigned l = 0; l < kNvlinkMaxLinks; ++l) {
        int state = 0;
        if (api_.nvlink_state(d, l, &state) != kNvmlSuccess || state != kNvmlFeatureEnabled)
          continue;
        NvmlPciInfo peer{};
        if (api_.nvlink_remote_pci(d, l, &peer) != kNvmlSuccess) continue;
        auto peer_id = normalize_pci_bus_id(peer.busId);
        // Each link is seen from both ends: count it once, from the lower bus id.
        if (!peer_id || *peer_id <= *self_id) continue;
        auto it = std::find_if(out.begin(), out.end(), [&](const PciLink& x) {
          return x.a_pci == *self_id && x.b_pci == *peer_id;
        });
        if (it == out.end()) {
          out.push_back(PciLink{*self_id, *peer_id, "nvlink", 1, std::nullopt, std::nullopt});
        } else {
          it->lanes = it->lanes.value_or(0) + 1;
        }
      }
    }
    return out;
  }

  std::optional<std::string> cuda_version() const override {
    int v = 0;
    if (api_.cuda_driver_version == nullptr || api_.cuda_driver_version(&v) != kNvmlSuccess)
      return std::nullopt;
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }

 private:
  std::string describe(nvmlReturn_t rc) const {
    if (api_.error_string != nullptr) return api_.error_string(rc);
    return "NVML error " + std::to_string(rc);
  }

  DynLib lib_;
  NvmlApi api_;
  bool initialized_ = false;
  std::vector<nvmlDevice_t> devices_;
};

}  // namespace

std::unique_ptr<GpuBackend> make_nvml_backend() {
  return std::make_unique<NvmlBackend>();
}

}  // namespace gpulab::gpu
