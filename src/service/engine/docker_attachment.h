// How a container gets exactly its GPUs on a Docker engine: NVIDIA device requests by UUID, AMD
// /dev/kfd plus each GPU's own render node, and the visibility variables; nothing else.
#pragma once

#include <string>
#include <vector>

#include "docker/types.h"
#include "service/base/config.h"

namespace gpulab::service {

// What the engine is told for a container holding `gpus` (possibly none). Only paths from the
// inventory (declared or discovered) are ever mapped; with DeviceMode::kNone nothing is.
struct GpuAttachment {
  std::vector<docker::GpuRequest> requests;    // NVIDIA device requests by UUID
  std::vector<docker::DeviceMapping> devices;  // AMD: kfd + each GPU's render node
  std::vector<std::string> env;                // visibility variables
  std::vector<std::string> group_add;
};
GpuAttachment attachment_for(const std::vector<GpuSlot>& gpus, const ServiceConfig& config);

}  // namespace gpulab::service
