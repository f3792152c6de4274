// What `gpulab detect` finds: one GpuInfo per device (every metric optional, units in the names),
// the links between devices, the host checks, and which backend answered or why it did not.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "gpu/host.h"

namespace gpulab::gpu {

enum class Vendor { kNvidia, kAmd };
const char* vendor_name(Vendor v);  // "nvidia", "amd"

struct GpuProcess {
  int pid = 0;
  std::string name;
  std::optional<std::uint64_t> memory_used_bytes;
};

struct GpuInfo {
  Vendor vendor = Vendor::kNvidia;
  int index = 0;       // the vendor's device index (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES)
  std::string source;  // backend that enumerated the device ("nvml", "amdgpu_sysfs", ...)
  std::string name;
  std::optional<std::string> uuid;
  std::optional<std::string> pci_bus_id;          // normalised "0000:18:00.0"
  std::optional<std::string> architecture;        // "Hopper", "CDNA3"
  std::optional<std::string> compute_capability;  // NVIDIA "9.0"
  std::optional<std::string> gfx_target;          // AMD "gfx942"
  std::optional<std::string> compute_partition;   // AMD SPX, DPX, TPX, QPX, CPX
  std::optional<std::string> memory_partition;    // AMD NPS1, NPS2, NPS4
  std::optional<std::string> driver_version;
  std::optional<int> compute_units;  // SMs (NVIDIA) or CUs (AMD)
  std::optional<int> numa_node;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<double> utilization_percent;
  std::optional<double> temperature_c;
  std::optional<std::uint64_t> power_mw;
  std::vector<GpuProcess> processes;
};

// A link between two GPUs of one vendor, named by their `index`.
struct GpuLink {
  Vendor vendor = Vendor::kNvidia;
  int a = 0;
  int b = 0;
  std::string type;           // "nvlink", "xgmi", "pcie"
  std::optional<int> lanes;   // NVLink: number of active links between the pair
  std::optional<int> hops;    // AMD: hops in the KFD topology
  std::optional<int> weight;  // AMD: KFD link weight (lower is closer)
};

// One row per backend tried: whether it answered, and if not, why.
struct BackendReport {
  std::string name;
  std::string vendor;
  std::string status;  // "used", "merged", "no devices", "unavailable", "skipped"
  std::string reason;
  int devices = 0;
};

struct DetectOptions {
  // A captured tree (sysfs, procfs, DIR/commands/*) read instead of the live system; empty means
  // live. With a root the dlopen backends are skipped and no command is run.
  std::filesystem::path root;
  bool host_checks = true;
  // Asked for the Docker engine's state during host checks (docker/engine_probe.h, passed in by
  // the CLI); without one the engine is reported as not checked.
  DockerProbe docker_probe;
  bool processes = true;
};

struct Inventory {
  std::string vendor = "none";  // "nvidia", "amd", "mixed", "none"
  std::vector<GpuInfo> gpus;
  std::vector<GpuLink> links;
  std::vector<BackendReport> backends;
  std::optional<std::string> cuda_version;  // driver's CUDA version (nvidia-smi / NVML)
  std::optional<std::string> rocm_version;  // /opt/rocm/.info/version
  std::optional<HostChecks> host;
  std::string root;           // the captured tree read, empty when live
  std::string no_gpu_reason;  // set when gpus is empty

  bool empty() const { return gpus.empty(); }
};

OrderedJson to_json(const Inventory& inv);
OrderedJson to_json(const GpuInfo& gpu);

}  // namespace gpulab::gpu
