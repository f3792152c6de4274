// Inventory from config or discovery, and live samples of the host's GPUs.
#include "service/engine/inventory.h"

#include <algorithm>
#include <map>
#include <regex>
#include <utility>

#include "core/files.h"
#include "gpu/detect.h"
#include "gpu/host.h"

namespace gpulab::service {

const GpuSlot* ServiceInventory::find(const std::string& uuid) const {
  for (const auto& g : gpus)
    if (g.uuid == uuid) return &g;
  return nullptr;
}

std::string gpu_type_of(const std::vector<GpuSlot>& gpus) {
  bool nv = false, amd = false;
  for (const auto& g : gpus) (g.vendor == "amd" ? amd : nv) = true;
  if (nv && amd) return "mixed";
  if (amd) return "rocm";  // the seed reports AMD hosts as "rocm"
  if (nv) return "nvidia";
  return "none";
}

std::string gpu_slot_id(const gpu::GpuInfo& g) {
  return g.uuid.value_or(g.pci_bus_id.value_or(std::string(gpu::vendor_name(g.vendor)) + "-" +
                                               std::to_string(g.index)));
}

ServiceInventory inventory_from_detected(const gpu::Inventory& found,
                                         const std::filesystem::path& root,
                                         const std::string& host) {
  // Detection numbers each vendor's GPUs from 0; a host's indices are one list (NVIDIA first,
  // as detect orders them), so a host with both vendors has no index twice. One vendor: as found.
  std::map<std::pair<gpu::Vendor, int>, int> index_of;
  for (const auto& g : found.gpus)
    index_of.emplace(std::pair(g.vendor, g.index), static_cast<int>(index_of.size()));
  ServiceInventory inv;
  for (const auto& g : found.gpus) {
    GpuSlot s;
    s.vendor = gpu::vendor_name(g.vendor);
    s.index = index_of.at({g.vendor, g.index});
    s.name = g.name;
    // Exclusive allocation needs a stable id, unique in the lab (the book is keyed by it).
    s.uuid = gpu_slot_id(g);
    if (!host.empty()) {
      s.host = host;
      if (!g.uuid) s.uuid = host + "/" + s.uuid;
    }
    s.numa_node = g.numa_node.value_or(-1);
    if (g.vendor == gpu::Vendor::kAmd && g.pci_bus_id) {
      s.render_node = gpu::render_node_of(*g.pci_bus_id, root);
      s.render_node_in_container = s.render_node;
    }
    for (const auto& l : found.links) {
      // Only direct links make GPUs "close"; a link's ends are its own vendor's indices.
      if (l.type == "pcie" || l.vendor != g.vendor) continue;
      const int peer = l.a == g.index ? l.b : l.b == g.index ? l.a : -1;
      auto it = index_of.find({g.vendor, peer});
      if (peer >= 0 && it != index_of.end()) s.links.push_back(it->second);
    }
    inv.gpus.push_back(std::move(s));
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(),
            [](const GpuSlot& a, const GpuSlot& b) { return a.index < b.index; });
  inv.source = inv.gpus.empty() ? "none" : "detected";
  inv.note = found.no_gpu_reason;
  inv.gpu_type = gpu_type_of(inv.gpus);
  return inv;
}

ServiceInventory build_inventory(const ServiceConfig& config) {
  if (config.gpus.empty() && config.detect_gpus) {
    gpu::DetectOptions opts;
    opts.host_checks = false;
    opts.processes = false;
    return inventory_from_detected(gpu::detect(opts));
  }
  ServiceInventory inv;
  inv.gpus = config.gpus;
  inv.source = inv.gpus.empty() ? "none" : "declared";
  std::sort(inv.gpus.begin(), inv.gpus.end(),
            [](const GpuSlot& a, const GpuSlot& b) { return a.index < b.index; });
  inv.gpu_type = gpu_type_of(inv.gpus);
  return inv;
}

std::string container_of_pid(int pid) {
  auto text = read_text("/proc/" + std::to_string(pid) + "/cgroup");
  if (!text) return {};
  // cgroup v1 ".../docker/<id>", v2 ".../docker-<id>.scope".
  static const std::regex kId("docker[-/]([0-9a-f]{64})");
  std::smatch m;
  if (std::regex_search(*text, m, kId)) return m[1];
  return {};
}

std::vector<GpuSample> sample_gpus(const ServiceInventory& inventory) {
  std::vector<GpuSample> out;
  if (inventory.source != "detected") return out;
  gpu::DetectOptions opts;
  opts.host_checks = false;
  opts.processes = true;
  gpu::Inventory found = gpu::detect(opts);
  for (const auto& g : found.gpus) {
    GpuSample s;
    s.uuid = gpu_slot_id(g);
    s.utilization_percent = g.utilization_percent;
    s.temperature_c = g.temperature_c;
    s.memory_used_bytes = g.memory_used_bytes;
    s.memory_total_bytes = g.memory_total_bytes;
    s.power_mw = g.power_mw;
    for (const auto& p : g.processes)
      s.processes.push_back({p.pid, p.name, container_of_pid(p.pid), p.memory_used_bytes});
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpulab::service
