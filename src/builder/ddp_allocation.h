// Where gpulab ddp gets its GPUs and SSH port: through a running `gpulab serve` (a lease, so the
// service never hands out what ddp holds and ddp never takes what the service gave out), or,
// when no service is there, directly on the engine (skipping what other containers hold).
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "builder/ddp_options.h"
#include "builder/service_lease.h"
#include "docker/lab_engine.h"
#include "gpu/inventory.h"

namespace gpulab::builder {

// What one ddp run holds, and how its container must be made to use it.
struct DdpGrant {
  std::vector<int> gpu_indices;  // empty: CPU ranks
  int ssh_port = 0;              // 0: none published
  std::string lease;             // service path: the lease's name
  std::vector<std::string> env;
  std::vector<docker::GpuRequest> gpu_requests;
  std::vector<docker::DeviceMapping> devices;
  std::vector<std::string> group_add;
  std::map<std::string, std::string> labels;
};

class DdpAllocator {
 public:
  // Picks the path and says which on `out`: --no-service -> direct; a service URL (--service or
  // $GPULAB_SERVICE) must answer and book for this engine, else it is an error; without one the
  // default URL is tried and ddp goes direct when nothing answers there.
  DdpAllocator(const DdpOptions& opts, const docker::LabEngine& engine, const gpu::Inventory& inv,
               std::ostream& out);

  bool via_service() const { return service_.has_value(); }
  // `gpus` GPUs on a GPU host (CPU ranks when none are there) and an SSH port when want_ssh.
  // Throws kResourceExhausted (the seed's "GPU allocation failed") when too few are free.
  DdpGrant allocate(int gpus, bool want_ssh);
  // Gives back what the service booked (after the container is gone); a failure only warns:
  // the service also releases a lease once it sees its container removed.
  void release(const DdpGrant& grant, std::ostream& out) const;

 private:
  DdpGrant allocate_direct(int gpus, bool want_ssh);
  const DdpOptions& opts_;
  const docker::LabEngine& engine_;
  const gpu::Inventory& inv_;
  std::optional<ServiceClient> service_;
  int service_gpus_ = 0;      // GPUs of the host the service books ddp's lease on
  std::string service_host_;  // that host's name in a lab service ("" for a one-engine service)
};

// Container and lease names (core/random.h draws them): no look-alike characters.
inline constexpr const char* kNameAlphabet =
    "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";

}  // namespace gpulab::builder
