// Host-side readiness for GPU containers: NVIDIA container toolkit installed, the AMD device
// nodes (/dev/kfd, /dev/dri/renderD*) present and usable, and -- through a probe the caller
// passes in -- the Docker engine reachable.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpulab::gpu {

struct DeviceNode {
  std::string path;
  bool accessible = false;  // access(R_OK | W_OK)
};

// The Docker engine as a caller holding the Docker client sees it. gpu sits beside the docker
// module, not above it (it builds where libcurl does not), so it never speaks to the engine itself.
struct DockerStatus {
  std::string endpoint;    // "unix:///var/run/docker.sock"
  bool reachable = false;  // GET /_ping answered 200 OK
  std::string detail;      // why not, or the API version the engine announced
};
using DockerProbe = std::function<DockerStatus()>;

struct HostChecks {
  std::string docker_endpoint;                // "unix:///var/run/docker.sock"
  std::optional<bool> docker_reachable;       // unset: not checked (no probe: built without Docker)
  std::string docker_detail;                  // why not, or the API version the engine announced
  std::optional<std::string> nvidia_toolkit;  // path of nvidia-container-cli / nvidia-ctk / runtime
  std::optional<DeviceNode> kfd;              // /dev/kfd
  std::vector<DeviceNode> render_nodes;       // /dev/dri/renderD*
  bool nvidia_device_nodes = false;           // /dev/nvidiactl present
};

// The render node of the GPU at that PCI address (/sys/bus/pci/devices/<bus>/drm/renderD* ->
// "/dev/dri/renderD128"); empty when it has none. A container given it (and /dev/kfd) sees that
// AMD GPU and no other. With `root`, in a captured tree (a GPU probe's), where the render nodes'
// device/uevent files under sys/class/drm name their PCI slot.
std::string render_node_of(const std::string& pci_bus_id, const std::filesystem::path& root = {});

// $DOCKER_HOST, or unix:///var/run/docker.sock.
std::string docker_endpoint_from_env();

// Device nodes and toolkit from the filesystem; the engine through `docker_probe` when given.
HostChecks check_host(const DockerProbe& docker_probe = {});

}  // namespace gpulab::gpu
