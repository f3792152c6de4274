// The names of inventory.h's types.
#include "gpu/inventory.h"

namespace gpulab::gpu {

const char* vendor_name(Vendor v) {
  return v == Vendor::kNvidia ? "nvidia" : "amd";
}

}  // namespace gpulab::gpu
