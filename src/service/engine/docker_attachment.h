// How a lab container gets exactly its GPUs on a Docker engine: the service's GPU slots and
// config handed to docker/gpu_attachment.h, the one home of that policy (gpulab ddp uses it too).
#pragma once

#include <vector>

#include "docker/gpu_attachment.h"
#include "service/base/config.h"

namespace gpulab::service {

using GpuAttachment = docker::GpuAttachment;
// What the engine is told for a container holding `gpus` (possibly none). Only paths from the
// inventory (declared or discovered) are ever mapped; with DeviceMode::kNone nothing is.
GpuAttachment attachment_for(const std::vector<GpuSlot>& gpus, const ServiceConfig& config);

}  // namespace gpulab::service
