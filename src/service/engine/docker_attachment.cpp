// The Docker GPU attachment of docker_attachment.h.
#include "service/engine/docker_attachment.h"

#include "core/strings.h"

namespace gpulab::service {

GpuAttachment attachment_for(const std::vector<GpuSlot>& gpus, const ServiceConfig& config) {
  GpuAttachment a;
  std::vector<std::string> nv_ids, all_ids;
  bool any_amd = false;
  for (const auto& g : gpus) {
    all_ids.push_back(g.uuid);
    if (g.vendor == "nvidia") nv_ids.push_back(g.uuid);
    if (g.vendor == "amd") any_amd = true;
  }
  // Always set, also to "void": on a host whose default runtime is nvidia, an image's own
  // NVIDIA_VISIBLE_DEVICES=all would otherwise show every GPU to a container given none.
  a.env.push_back("NVIDIA_VISIBLE_DEVICES=" +
                  (nv_ids.empty() ? std::string("void") : join(nv_ids, ",")));
  a.env.push_back("GPULAB_GPU_UUIDS=" + join(all_ids, ","));
  if (config.device_mode == DeviceMode::kNone) return a;
  if (!nv_ids.empty()) {
    docker::GpuRequest r;
    r.device_ids = nv_ids;
    a.requests.push_back(r);
  }
  if (any_amd) {
    a.devices.push_back({config.amd_kfd_path, config.amd_kfd_in_container, "rwm"});
    for (const auto& g : gpus) {
      if (g.vendor != "amd" || g.render_node.empty()) continue;
      a.devices.push_back(
          {g.render_node,
           g.render_node_in_container.empty() ? g.render_node : g.render_node_in_container, "rwm"});
    }
    // Lab containers run as root: no extra group is needed (and an image may lack "video").
  }
  return a;
}

}  // namespace gpulab::service
