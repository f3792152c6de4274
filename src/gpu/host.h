// Host-side readiness for GPU containers: Docker engine reachable, NVIDIA container toolkit
// installed, and the AMD device nodes (/dev/kfd, /dev/dri/renderD*) present and usable.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpulab::gpu {

struct DeviceNode {
  std::string path;
  bool accessible = false;  // access(R_OK | W_OK)
};

struct HostChecks {
  std::string docker_endpoint;                // "unix:///var/run/docker.sock"
  bool docker_reachable = false;              // GET /_ping answered 200 OK
  std::string docker_detail;                  // why not, or the API version the engine announced
  std::optional<std::string> nvidia_toolkit;  // path of nvidia-container-cli / nvidia-ctk / runtime
  std::optional<DeviceNode> kfd;              // /dev/kfd
  std::vector<DeviceNode> render_nodes;       // /dev/dri/renderD*
  bool nvidia_device_nodes = false;           // /dev/nvidiactl present
};

// Pings the engine at $DOCKER_HOST (unix:// or tcp://) or /var/run/docker.sock with a raw
// "GET /_ping HTTP/1.0" over a plain socket; gives up after timeout_ms.
bool ping_docker(const std::string& endpoint, std::string& detail, int timeout_ms = 2000);
std::string docker_endpoint_from_env();

HostChecks check_host();

}  // namespace gpulab::gpu
