// The service's side of the Docker GPU attachment (docker_attachment.h).
#include "service/engine/docker_attachment.h"

namespace gpulab::service {

GpuAttachment attachment_for(const std::vector<GpuSlot>& gpus, const ServiceConfig& config) {
  std::vector<docker::AttachedGpu> attached;
  for (const auto& g : gpus)
    attached.push_back({g.vendor, g.uuid, g.render_node, g.render_node_in_container});
  docker::AttachmentOptions opts;
  opts.map_devices = config.device_mode != DeviceMode::kNone;
  opts.kfd_path = config.amd_kfd_path;
  opts.kfd_in_container = config.amd_kfd_in_container;
  // Lab containers run as root: no extra group is needed (and an image may lack "video").
  opts.video_group = false;
  return docker::gpu_attachment(attached, opts);
}

}  // namespace gpulab::service
