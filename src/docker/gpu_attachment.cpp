// The GPU attachment policy of gpu_attachment.h.
#include "docker/gpu_attachment.h"

#include "core/strings.h"

namespace gpulab::docker {

GpuAttachment gpu_attachment(const std::vector<AttachedGpu>& gpus, const AttachmentOptions& opts) {
  GpuAttachment a;
  std::vector<std::string> nv_ids, all_ids;
  bool any_amd = false;
  for (const auto& g : gpus) {
    all_ids.push_back(g.id);
    if (g.vendor == "nvidia") nv_ids.push_back(g.id);
    if (g.vendor == "amd") any_amd = true;
  }
  // Always set, also to "void": on a host whose default runtime is nvidia, an image's own
  // NVIDIA_VISIBLE_DEVICES=all would otherwise show every GPU to a container given none.
  a.env.push_back("NVIDIA_VISIBLE_DEVICES=" +
                  (nv_ids.empty() ? std::string("void") : join(nv_ids, ",")));
  a.env.push_back("GPULAB_GPU_UUIDS=" + join(all_ids, ","));
  if (!opts.map_devices) return a;
  if (!nv_ids.empty()) {
    GpuRequest r;
    r.device_ids = nv_ids;
    a.requests.push_back(r);
  }
  if (any_amd) {
    // ROCm lists the GPUs whose render node it can open: mapping only these keeps the others out
    // (and their indices inside start at 0, so no HIP_VISIBLE_DEVICES is needed or correct).
    a.devices.push_back({opts.kfd_path, opts.kfd_in_container, "rwm"});
    for (const auto& g : gpus) {
      if (g.vendor != "amd" || g.render_node.empty()) continue;
      a.devices.push_back(
          {g.render_node,
           g.render_node_in_container.empty() ? g.render_node : g.render_node_in_container, "rwm"});
    }
    if (opts.video_group) a.group_add.push_back("video");
  }
  return a;
}

}  // namespace gpulab::docker
