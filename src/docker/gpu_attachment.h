// How a container gets exactly its GPUs on a Docker engine, for every caller that makes one (the
// service's lab containers and leases, gpulab ddp's direct path): NVIDIA device requests by id,
// AMD /dev/kfd plus each GPU's own render node, and the visibility variables; nothing else.
#pragma once

#include <string>
#include <vector>

#include "docker/types.h"

namespace gpulab::docker {

// One GPU given to a container, as the caller's inventory knows it.
struct AttachedGpu {
  std::string vendor;       // "nvidia" or "amd"
  std::string id;           // what the engine is asked for: the UUID (an index where there is none)
  std::string render_node;  // AMD: host path of its render node, empty if unknown
  std::string render_node_in_container;  // empty: the host path
};

struct AttachmentOptions {
  bool map_devices = true;  // false: bookkeeping and visibility env only (declared fake GPUs)
  std::string kfd_path = "/dev/kfd";
  std::string kfd_in_container;  // empty: the host path
  // Adds the "video" group for AMD GPUs: for images whose processes run as a user that is not
  // root (gpulab's lab images have the group; an image without it would fail to start).
  bool video_group = false;
};

struct GpuAttachment {
  std::vector<GpuRequest> requests;    // NVIDIA device requests by id
  std::vector<DeviceMapping> devices;  // AMD: kfd + each GPU's render node
  std::vector<std::string> env;        // NVIDIA_VISIBLE_DEVICES, GPULAB_GPU_UUIDS
  std::vector<std::string> group_add;
};

// What the engine is told for a container holding `gpus` (possibly none). Only the render nodes
// given are mapped, never all of /dev/dri: a container sees its own GPUs and no other.
GpuAttachment gpu_attachment(const std::vector<AttachedGpu>& gpus, const AttachmentOptions& opts);

}  // namespace gpulab::docker
