// detect(): walks the vendor table, takes each vendor's devices from the first backend that finds
// any, fills gaps from the cheaper ones after it, and joins the links into a topology.
#include "gpu/detect.h"

#include <algorithm>
#include <map>

#include "core/files.h"
#include "core/strings.h"
#include "gpu/backend.h"

namespace gpulab::gpu {

namespace {

template <typename T>
void fill(std::optional<T>& into, const std::optional<T>& from) {
  if (!into && from) into = from;
}

// Adds what `from` knows and `into` does not; the first backend's answers stand.
void merge_into(GpuInfo& into, const GpuInfo& from) {
  if (into.name.empty()) into.name = from.name;
  fill(into.uuid, from.uuid);
  fill(into.pci_bus_id, from.pci_bus_id);
  fill(into.architecture, from.architecture);
  fill(into.compute_capability, from.compute_capability);
  fill(into.gfx_target, from.gfx_target);
  fill(into.compute_partition, from.compute_partition);
  fill(into.memory_partition, from.memory_partition);
  fill(into.driver_version, from.driver_version);
  fill(into.compute_units, from.compute_units);
  fill(into.numa_node, from.numa_node);
  fill(into.memory_total_bytes, from.memory_total_bytes);
  fill(into.memory_used_bytes, from.memory_used_bytes);
  fill(into.utilization_percent, from.utilization_percent);
  fill(into.temperature_c, from.temperature_c);
  fill(into.power_mw, from.power_mw);
  if (into.processes.empty()) into.processes = from.processes;
}

// The same device in two backends: by PCI bus id, else by UUID.
GpuInfo* find_same(std::vector<GpuInfo>& list, const GpuInfo& g) {
  for (auto& e : list) {
    if (e.pci_bus_id && g.pci_bus_id && *e.pci_bus_id == *g.pci_bus_id) return &e;
    if (e.uuid && g.uuid && to_lower(*e.uuid) == to_lower(*g.uuid)) return &e;
  }
  return nullptr;
}

// Step 1: one backend of the vendor table: its devices, merged into what an earlier backend of
// the same vendor found, or skipped when that one already answered and this one is expensive.
void run_backend(GpuBackend& b, const DetectOptions& opts, Inventory& inv,
                 std::map<Vendor, std::vector<GpuInfo>>& found,
                 std::vector<std::pair<Vendor, PciLink>>& links) {
  BackendReport r{std::string(b.name()), vendor_name(b.vendor()), "", "", 0};
  std::vector<GpuInfo>& mine = found[b.vendor()];
  if (!mine.empty() && b.expensive(opts)) {
    r.status = "skipped";
    r.reason = "devices already found by " + mine.front().source;
    inv.backends.push_back(std::move(r));
    return;
  }
  if (!b.init(opts)) {
    r.reason = b.last_error();
    r.status = "unavailable";
    if (starts_with(r.reason, "skipped: ")) {
      r.status = "skipped";
      r.reason = r.reason.substr(9);
    }
    inv.backends.push_back(std::move(r));
    return;
  }
  r.devices = b.device_count();
  std::vector<GpuInfo> got;
  for (int i = 0; i < r.devices; ++i) {
    GpuInfo g = b.static_info(i);
    b.sample(i, g);
    if (opts.processes) g.processes = b.processes(i);
    got.push_back(std::move(g));
  }
  for (auto& l : b.links()) links.emplace_back(b.vendor(), std::move(l));
  if (!inv.cuda_version) inv.cuda_version = b.cuda_version();
  if (mine.empty()) {
    mine = std::move(got);
    r.status = "used";
  } else {
    for (const auto& g : got) {
      if (GpuInfo* same = find_same(mine, g)) merge_into(*same, g);
    }
    r.status = "merged";
  }
  inv.backends.push_back(std::move(r));
}

// Step 2: links are found by bus id; name them by the GPUs' indexes, once per pair.
void add_links(const std::vector<std::pair<Vendor, PciLink>>& links, Inventory& inv) {
  for (const auto& entry : links) {
    // Plain names, not a structured binding: clang before 16 cannot capture those in a lambda.
    const Vendor v = entry.first;
    const PciLink& l = entry.second;
    auto index_of = [&](const std::string& pci) -> std::optional<int> {
      for (const auto& g : inv.gpus) {
        if (g.vendor == v && g.pci_bus_id == pci) return g.index;
      }
      return std::nullopt;
    };
    auto a = index_of(l.a_pci), b = index_of(l.b_pci);
    if (!a || !b) continue;
    int lo = std::min(*a, *b), hi = std::max(*a, *b);
    bool dup = std::any_of(inv.links.begin(), inv.links.end(), [&](const GpuLink& x) {
      return x.vendor == v && x.a == lo && x.b == hi;
    });
    if (!dup) inv.links.push_back(GpuLink{v, lo, hi, l.type, l.lanes, l.hops, l.weight});
  }
}

}  // namespace

Inventory detect(const DetectOptions& opts) {
  Inventory inv;
  inv.root = opts.root.string();
  std::map<Vendor, std::vector<GpuInfo>> found;
  std::vector<std::pair<Vendor, PciLink>> links;
  for (auto& b : make_backends()) run_backend(*b, opts, inv, found, links);

  for (Vendor v : {Vendor::kNvidia, Vendor::kAmd}) {
    for (auto& g : found[v]) inv.gpus.push_back(std::move(g));
  }
  auto has = [&](Vendor v) {
    return std::any_of(inv.gpus.begin(), inv.gpus.end(),
                       [v](const GpuInfo& g) { return g.vendor == v; });
  };
  bool nv = has(Vendor::kNvidia), amd = has(Vendor::kAmd);
  inv.vendor = nv && amd ? "mixed" : nv ? "nvidia" : amd ? "amd" : "none";
  add_links(links, inv);

  if (auto v = read_text(under_root(opts.root, "/opt/rocm/.info/version")); v && !v->empty())
    inv.rocm_version = *v;
  // The backends' own reasons stay in inv.backends, one per line.
  if (inv.gpus.empty()) inv.no_gpu_reason = "neither NVIDIA nor ROCm environment detected";
  // Host checks describe the machine we run on, so they make no sense for a captured tree.
  if (opts.host_checks && opts.root.empty()) inv.host = check_host(opts.docker_probe);
  return inv;
}

}  // namespace gpulab::gpu
