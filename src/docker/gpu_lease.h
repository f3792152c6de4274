// A GPU lease as it travels between `gpulab serve` (POST/GET /api/v1/gpu-docker/leases) and
// `gpulab ddp`, which creates the leased container itself: one type, one JSON form, for both
// sides. It lives here, the lowest module both the service and the builder depend on, because the
// attachment is in the engine's own terms (device requests, device mappings).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/result.h"
#include "docker/types.h"

namespace gpulab::docker {

// The label that ties an engine container to its lease: gpulab.lease=<lease name>.
inline constexpr const char* kLeaseLabel = "gpulab.lease";

// How the leased container must get its GPUs, exactly as the service would attach them.
struct LeaseAttachment {
  std::vector<std::string> env;  // visibility variables
  std::vector<GpuRequest> device_requests;
  std::vector<DeviceMapping> devices;
};

struct GpuLease {
  std::string name;
  std::string owner;
  std::vector<int> gpu_indices;  // "gpu_devices" on the wire, as for containers
  std::vector<std::string> gpu_uuids;
  int ssh_port = 0;                      // 0: none booked
  std::string gpu_type;                  // the service's inventory: "nvidia", "rocm", "none", ...
  std::string label = kLeaseLabel;       // the label key; its value is the lease's name
  std::optional<std::string> container;  // the engine container bound to it, if any
  std::string created_at;
  // Only in the answer that created the lease:
  std::optional<LeaseAttachment> attachment;
  std::optional<int> grace_seconds;      // released if no container carries the label by then
  std::optional<std::string> engine_id;  // the engine the service books for (Docker's /info ID)

  Json to_json() const;
  // kDataError naming what is missing or mistyped.
  static Result<GpuLease> from_json(const Json& j);
};

}  // namespace gpulab::docker
