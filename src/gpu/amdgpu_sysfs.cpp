// AMD backend from the kernel's files alone: DRM cards under /sys/class/drm (amdgpu attributes,
// hwmon sensors, partition modes) joined with the KFD topology (gfx target, CUs, XGMI links).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "core/files.h"
#include "core/strings.h"
#include "gpu/backend.h"
#include "gpu/known_devices.h"

namespace gpulab::gpu {

namespace {

constexpr int kKfdIoLinkXgmi = 11;  // KFD io_links "type" values (kfd_crat.h)
constexpr int kKfdIoLinkPcie = 2;

using Props = std::map<std::string, std::uint64_t>;

// KFD "properties" files are "key value" lines.
Props read_props(const fs::path& file) {
  Props out;
  auto text = read_text(file);
  if (!text) return out;
  for (const auto& line : split(*text, '\n')) {
    auto parts = split(line, ' ');
    if (parts.size() != 2) continue;
    if (auto v = parse_uint(parts[1])) out[parts[0]] = *v;
  }
  return out;
}

std::uint64_t prop(const Props& p, const std::string& key) {
  auto it = p.find(key);
  return it == p.end() ? 0 : it->second;
}

struct KfdNode {
  int id = 0;
  std::string pci;
  Props props;
};

struct Card {
  fs::path device;  // .../cardN/device
  GpuInfo info;
};

class AmdgpuSysfsBackend : public GpuBackend {
 public:
  std::string_view name() const override { return "amdgpu_sysfs"; }
  Vendor vendor() const override { return Vendor::kAmd; }

  bool init(const DetectOptions& opts) override {
    root_ = opts.root;
    fs::path drm = under_root(root_, "/sys/class/drm");
    std::error_code ec;
    if (!fs::is_directory(drm, ec)) return fail(drm.string() + " does not exist");
    std::vector<std::pair<int, fs::path>> cards;
    for (const auto& e : fs::directory_iterator(drm, ec)) {
      std::string n = e.path().filename().string();
      if (!starts_with(n, "card") || n.size() == 4) continue;
      auto num = parse_uint(n.substr(4));  // skips connectors such as card0-DP-1
      if (num) cards.emplace_back(static_cast<int>(*num), e.path());
    }
    std::sort(cards.begin(), cards.end());
    read_kfd();
    for (const auto& [num, path] : cards) {
      fs::path dev = path / "device";
      if (read_text(dev / "vendor").value_or("") != "0x1002") continue;
      // Compute partitions beyond the first show up as extra cards of the same PCI device.
      Card c{dev, read_card(dev, static_cast<int>(cards_.size()))};
      bool dup = c.info.pci_bus_id && std::any_of(cards_.begin(), cards_.end(), [&](const Card& o) {
                   return o.info.pci_bus_id == c.info.pci_bus_id;
                 });
      if (!dup) cards_.push_back(std::move(c));
    }
    if (cards_.empty()) return fail("no card with vendor 0x1002 under " + drm.string());
    return true;
  }

  int device_count() const override { return static_cast<int>(cards_.size()); }
  GpuInfo static_info(int i) const override { return cards_.at(static_cast<size_t>(i)).info; }

  void sample(int i, GpuInfo& g) const override {
    const fs::path& dev = cards_.at(static_cast<size_t>(i)).device;
    if (auto v = read_uint(dev / "mem_info_vram_used")) g.memory_used_bytes = *v;
    if (auto v = read_uint(dev / "gpu_busy_percent"))
      g.utilization_percent = static_cast<double>(*v);
    std::error_code ec;
    for (const auto& h : fs::directory_iterator(dev / "hwmon", ec)) {
      // Prefer the junction sensor (MI300 has no edge sensor), then edge, then the first one.
      std::optional<double> temp;
      for (const char* want : {"junction", "edge", ""}) {
        for (int k = 1; k <= 4 && !temp; ++k) {
          std::string base = "temp" + std::to_string(k);
          std::string label = read_text(h.path() / (base + "_label")).value_or("");
          if (*want != '\0' && label != want) continue;
          if (auto v = read_uint(h.path() / (base + "_input")))
            temp = static_cast<double>(*v) / 1000.0;
        }
        if (temp) break;
      }
      if (temp) g.temperature_c = temp;
      auto uw = read_uint(h.path() / "power1_average");
      if (!uw) uw = read_uint(h.path() / "power1_input");
      if (uw) g.power_mw = *uw / 1000;
    }
  }

  std::vector<PciLink> links() const override {
    std::vector<PciLink> out;
    std::map<int, std::string> pci_of_node;
    for (const auto& n : nodes_) pci_of_node[n.id] = n.pci;
    for (const auto& n : nodes_) {
      fs::path dir = under_root(root_, "/sys/class/kfd/kfd/topology/nodes") / std::to_string(n.id);
      for (const char* sub : {"io_links", "p2p_links"}) {
        std::error_code ec;
        for (const auto& l : fs::directory_iterator(dir / sub, ec)) {
          Props p = read_props(l.path() / "properties");
          int to = static_cast<int>(prop(p, "node_to"));
          auto peer = pci_of_node.find(to);
          if (peer == pci_of_node.end() || peer->second.empty() || !(n.pci < peer->second))
            continue;
          int type = static_cast<int>(prop(p, "type"));
          std::string kind = type == kKfdIoLinkXgmi   ? "xgmi"
                             : type == kKfdIoLinkPcie ? "pcie"
                                                      : "other";
          bool seen = std::any_of(out.begin(), out.end(), [&](const PciLink& x) {
            return x.a_pci == n.pci && x.b_pci == peer->second;
          });
          if (seen) continue;
          PciLink link{n.pci, peer->second, kind, std::nullopt, 1, std::nullopt};
          if (p.count("weight")) link.weight = static_cast<int>(prop(p, "weight"));
          out.push_back(std::move(link));
        }
      }
    }
    return out;
  }

 private:
  static std::optional<std::uint64_t> read_uint(const fs::path& p) {
    auto t = read_text(p);
    return t ? parse_uint(*t) : std::nullopt;
  }

  void read_kfd() {
    fs::path dir = under_root(root_, "/sys/class/kfd/kfd/topology/nodes");
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      auto id = parse_uint(e.path().filename().string());
      if (!id) continue;
      KfdNode n;
      n.id = static_cast<int>(*id);
      n.props = read_props(e.path() / "properties");
      if (prop(n.props, "simd_count") == 0) continue;  // a CPU node
      // location_id is bus << 8 | device << 3 | function, as in a PCI BDF.
      std::uint64_t loc = prop(n.props, "location_id");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x",
                    static_cast<unsigned>(prop(n.props, "domain")),
                    static_cast<unsigned>((loc >> 8) & 0xff),
                    static_cast<unsigned>((loc >> 3) & 0x1f), static_cast<unsigned>(loc & 0x7));
      n.pci = buf;
      nodes_.push_back(std::move(n));
    }
    std::sort(nodes_.begin(), nodes_.end(),
              [](const KfdNode& a, const KfdNode& b) { return a.id < b.id; });
  }

  GpuInfo read_card(const fs::path& dev, int index) const {
    GpuInfo g;
    g.vendor = Vendor::kAmd;
    g.index = index;
    g.source = "amdgpu_sysfs";
    // uevent names the PCI slot both on a live system and in a captured copy (no symlinks).
    if (auto ue = read_text(dev / "uevent")) {
      for (const auto& line : split(*ue, '\n')) {
        if (starts_with(line, "PCI_SLOT_NAME="))
          g.pci_bus_id = normalize_pci_bus_id(line.substr(14));
      }
    }
    if (!g.pci_bus_id) {
      std::error_code ec;
      fs::path real = fs::canonical(dev, ec);
      if (!ec) g.pci_bus_id = normalize_pci_bus_id(real.filename().string());
    }
    g.name = read_text(dev / "product_name").value_or("");
    if (g.name.empty()) {
      auto id = read_uint(dev / "device");
      auto known = id ? amd_name_for_device_id(static_cast<unsigned>(*id)) : std::nullopt;
      g.name = known.value_or("AMD GPU " + read_text(dev / "device").value_or("(unknown id)"));
    }
    if (auto u = read_text(dev / "unique_id"); u && !u->empty()) g.uuid = "0x" + to_lower(*u);
    if (auto v = read_uint(dev / "mem_info_vram_total")) g.memory_total_bytes = *v;
    if (auto p = read_text(dev / "current_compute_partition"); p && !p->empty())
      g.compute_partition = to_upper(*p);
    if (auto p = read_text(dev / "current_memory_partition"); p && !p->empty())
      g.memory_partition = to_upper(*p);
    if (auto n = read_text(dev / "numa_node")) {
      if (auto v = leading_number(*n); v && *v >= 0) g.numa_node = static_cast<int>(*v);
    }
    if (auto v = read_text(under_root(root_, "/sys/module/amdgpu/version")); v && !v->empty())
      g.driver_version = *v;
    // The KFD nodes of this PCI device: one per compute partition.
    int cus = 0;
    for (const auto& n : nodes_) {
      if (!g.pci_bus_id || n.pci != *g.pci_bus_id) continue;
      if (!g.gfx_target)
        g.gfx_target = gfx_from_target_version(prop(n.props, "gfx_target_version"));
      std::uint64_t per_cu = prop(n.props, "simd_per_cu");
      if (per_cu > 0) cus += static_cast<int>(prop(n.props, "simd_count") / per_cu);
    }
    if (cus > 0) g.compute_units = cus;
    if (g.gfx_target) g.architecture = amd_architecture(*g.gfx_target);
    return g;
  }

  fs::path root_;
  std::vector<KfdNode> nodes_;
  std::vector<Card> cards_;
};

}  // namespace

std::unique_ptr<GpuBackend> make_amdgpu_sysfs_backend() {
  return std::make_unique<AmdgpuSysfsBackend>();
}

}  // namespace gpulab::gpu
