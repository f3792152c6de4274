// The GPUs the service hands out: declared in the config file, or found by gpulab detect
// (src/gpu); and how a container gets exactly its own GPUs and no other.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpu/inventory.h"
#include "service/base/config.h"

namespace gpulab::service {

struct ServiceInventory {
  std::vector<GpuSlot> gpus;  // sorted by index
  std::string source;         // "declared", "detected" (here or by a probe), "none"
  std::string gpu_type;       // the seed's status field: "nvidia", "rocm", "mixed", "none"
  std::string note;           // why discovery found nothing, when it did not
  const GpuSlot* find(const std::string& uuid) const;
};

// The seed's gpu_type of these GPUs: "nvidia", "rocm", "mixed" or "none".
std::string gpu_type_of(const std::vector<GpuSlot>& gpus);

// Declared GPUs win; else discovery on this machine (when enabled); else an empty inventory.
ServiceInventory build_inventory(const ServiceConfig& config);
// What gpu::detect found, live or in a captured tree at `root` (a host's probe), as the GPUs the
// service hands out: a stable id each, NUMA node, direct links, AMD render nodes. With `host`
// (a probed host) each GPU carries it, and an id that is not the GPU's own UUID (a PCI address,
// the same on every server of one model) is qualified by it: "lab2/0000:c1:00.0".
ServiceInventory inventory_from_detected(const gpu::Inventory& found,
                                         const std::filesystem::path& root = {},
                                         const std::string& host = {});

// The id the service books a GPU by: its UUID, else its PCI address, else vendor and index.
std::string gpu_slot_id(const gpu::GpuInfo& g);

// Live per-GPU metrics (utilization, memory, temperature, power, processes) by uuid, from the
// discovery backends; empty for declared GPUs the host does not have.
struct GpuSample {
  std::string uuid;
  std::optional<double> utilization_percent, temperature_c;
  std::optional<std::uint64_t> memory_used_bytes, memory_total_bytes, power_mw;
  struct Proc {
    int pid = 0;
    std::string name;
    std::string container_id;  // docker id from /proc/<pid>/cgroup, "" if not in a container
    std::optional<std::uint64_t> memory_used_bytes;
  };
  std::vector<Proc> processes;
};
std::vector<GpuSample> sample_gpus(const ServiceInventory& inventory);

// The docker container id a host process belongs to, from its cgroup path ("" if none).
std::string container_of_pid(int pid);

}  // namespace gpulab::service
