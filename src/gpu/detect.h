// detect(): every backend (backend.h) over the live host or a captured tree, merged into one
// Inventory (inventory.h) with its links and, on the live host, the host checks.
#pragma once

#include "gpu/inventory.h"

namespace gpulab::gpu {

Inventory detect(const DetectOptions& opts = {});

}  // namespace gpulab::gpu
