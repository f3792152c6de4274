// Host checks for GPU containers (see host.h): the filesystem's device nodes and toolkit; the
// Docker engine only through the caller's probe.
#include "gpu/host.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/files.h"
#include "core/strings.h"

namespace gpulab::gpu {

namespace {

std::vector<DeviceNode> render_nodes() {
  std::vector<DeviceNode> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/dri", ec)) {
    std::string n = e.path().filename().string();
    if (!starts_with(n, "renderD")) continue;
    out.push_back({e.path().string(), ::access(e.path().c_str(), R_OK | W_OK) == 0});
  }
  std::sort(out.begin(), out.end(),
            [](const DeviceNode& a, const DeviceNode& b) { return a.path < b.path; });
  return out;
}

}  // namespace

std::string render_node_of(const std::string& pci_bus_id, const std::filesystem::path& root) {
  std::error_code ec;
  if (!root.empty()) {
    for (const auto& e : std::filesystem::directory_iterator(root / "sys/class/drm", ec)) {
      const std::string n = e.path().filename().string();
      if (!starts_with(n, "renderD")) continue;
      for (const auto& line : split(read_text(e.path() / "device/uevent").value_or(""), '\n'))
        if (line == "PCI_SLOT_NAME=" + to_lower(pci_bus_id)) return "/dev/dri/" + n;
    }
    return {};
  }
  const auto drm = std::filesystem::path("/sys/bus/pci/devices") / to_lower(pci_bus_id) / "drm";
  for (const auto& e : std::filesystem::directory_iterator(drm, ec)) {
    std::string n = e.path().filename().string();
    if (starts_with(n, "renderD")) return "/dev/dri/" + n;
  }
  return {};
}

std::string docker_endpoint_from_env() {
  const char* h = std::getenv("DOCKER_HOST");
  if (h != nullptr && *h != '\0') return h;
  return "unix:///var/run/docker.sock";
}

HostChecks check_host(const DockerProbe& docker_probe) {
  HostChecks h;
  if (docker_probe) {
    DockerStatus d = docker_probe();
    h.docker_endpoint = d.endpoint;
    h.docker_reachable = d.reachable;
    h.docker_detail = d.detail;
  } else {
    h.docker_endpoint = docker_endpoint_from_env();
    h.docker_detail = "not checked: no Docker client in this build";
  }
  for (const char* tool : {"nvidia-container-cli", "nvidia-ctk", "nvidia-container-runtime"}) {
    auto p = which(tool);
    if (!p) p = find_executable({std::filesystem::path("/usr/bin") / tool});
    if (p) {
      h.nvidia_toolkit = p->string();
      break;
    }
  }
  std::error_code ec;
  if (std::filesystem::exists("/dev/kfd", ec))
    h.kfd = DeviceNode{"/dev/kfd", ::access("/dev/kfd", R_OK | W_OK) == 0};
  h.render_nodes = render_nodes();
  h.nvidia_device_nodes = std::filesystem::exists("/dev/nvidiactl", ec);
  return h;
}

}  // namespace gpulab::gpu
