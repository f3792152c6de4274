// NVIDIA backend from the kernel module's files: /proc/driver/nvidia/version (driver) and
// /proc/driver/nvidia/gpus/<bus id>/information (model, UUID, bus, minor). Works without NVML.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "core/files.h"
#include "core/strings.h"
#include "gpu/backend.h"
#include "gpu/known_devices.h"

namespace gpulab::gpu {

namespace {

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." -> "550.54.15"
std::optional<std::string> driver_from_version_file(const std::string& text) {
  for (const auto& line : split(text, '\n')) {
    if (!starts_with(line, "NVRM version:")) continue;
    for (const auto& word : split(line, ' ')) {
      if (word.find('.') != std::string::npos && std::isdigit(static_cast<unsigned char>(word[0])))
        return word;
    }
  }
  return std::nullopt;
}

// "Key: \t value" lines.
std::map<std::string, std::string> read_information(const std::string& text) {
  std::map<std::string, std::string> out;
  for (const auto& line : split(text, '\n')) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    out[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  return out;
}

class NvidiaProcfsBackend : public GpuBackend {
 public:
  std::string_view name() const override { return "nvidia_procfs"; }
  Vendor vendor() const override { return Vendor::kNvidia; }

  bool init(const DetectOptions& opts) override {
    fs::path base = under_root(opts.root, "/proc/driver/nvidia");
    auto version = read_text(base / "version");
    if (!version)
      return fail(base.string() + "/version not found (NVIDIA kernel module not loaded)");
    driver_ = driver_from_version_file(*version);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base / "gpus", ec)) {
      auto text = read_text(e.path() / "information");
      if (!text) continue;
      auto info = read_information(*text);
      GpuInfo g;
      g.vendor = Vendor::kNvidia;
      g.source = "nvidia_procfs";
      g.name = info["Model"];
      if (!info["GPU UUID"].empty()) g.uuid = info["GPU UUID"];
      g.pci_bus_id = normalize_pci_bus_id(info["Bus Location"]);
      if (!g.pci_bus_id) g.pci_bus_id = normalize_pci_bus_id(e.path().filename().string());
      // The device minor is /dev/nvidiaN; CUDA orders devices by bus id instead (see below).
      g.driver_version = driver_;
      g.compute_capability = nvidia_compute_capability(g.name);
      if (g.compute_capability) g.architecture = nvidia_architecture(*g.compute_capability);
      if (g.pci_bus_id) {
        auto numa = read_text(
            under_root(opts.root, "/sys/bus/pci/devices/" + *g.pci_bus_id + "/numa_node"));
        if (auto v = numa ? leading_number(*numa) : std::nullopt; v && *v >= 0)
          g.numa_node = static_cast<int>(*v);
      }
      gpus_.push_back(std::move(g));
    }
    if (gpus_.empty()) return fail("no GPU listed under " + (base / "gpus").string());
    // nvidia-smi and CUDA (with CUDA_DEVICE_ORDER=PCI_BUS_ID) number devices by bus id.
    std::sort(gpus_.begin(), gpus_.end(), [](const GpuInfo& a, const GpuInfo& b) {
      return a.pci_bus_id.value_or("") < b.pci_bus_id.value_or("");
    });
    for (size_t i = 0; i < gpus_.size(); ++i) gpus_[i].index = static_cast<int>(i);
    return true;
  }

  int device_count() const override { return static_cast<int>(gpus_.size()); }
  GpuInfo static_info(int i) const override { return gpus_.at(static_cast<size_t>(i)); }
  void sample(int, GpuInfo&) const override {}  // the kernel files carry no live metrics

 private:
  std::optional<std::string> driver_;
  std::vector<GpuInfo> gpus_;
};

}  // namespace

std::unique_ptr<GpuBackend> make_nvidia_procfs_backend() {
  return std::make_unique<NvidiaProcfsBackend>();
}

}  // namespace gpulab::gpu
