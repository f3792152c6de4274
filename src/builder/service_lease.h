// gpulab ddp's side of the service's GPU leases: finds a running `gpulab serve` (--service,
// $GPULAB_SERVICE, or the default http://127.0.0.1:8000), books GPUs and an SSH port there under
// the caller's token, and releases them when the run ends. The container itself is made by ddp
// on the engine (it needs host mounts the API never allows), labeled gpulab.lease=<name>.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "docker/gpu_lease.h"
#include "docker/http_transport.h"

namespace gpulab::builder {

inline constexpr const char* kDefaultServiceUrl = "http://127.0.0.1:8000";

struct ServiceHealth {
  bool engine = false;
  int gpus = 0;           // GPUs in the service's inventory
  std::string engine_id;  // the engine of its first host (Docker's /info ID)
  struct Host {
    std::string name, engine_id;  // engine_id: empty while the host is down
    int gpus = 0;
  };
  std::vector<Host> hosts;  // a lab service's hosts (older services: none)
  // The hosts whose engine has `id` (a lab's hosts each have their own; two that share one were
  // cloned with Docker's identity); for an older service without hosts, {""} when its engine has.
  std::vector<std::string> hosts_of(const std::string& id) const;
};

class ServiceClient {
 public:
  // "http://host:port" or "https://host:port"; token may be empty (loopback service, no auth).
  static Result<ServiceClient> open(const std::string& url, const std::string& token);
  const std::string& url() const { return url_; }

  // GET /healthz with a short timeout: is a gpulab serve answering there?
  Result<ServiceHealth> health() const;
  // POST /api/v1/gpu-docker/leases; the answer carries its attachment. GPU_ALLOCATION_FAILED ->
  // kResourceExhausted, a bad token -> kPermissionDenied, other API errors -> their code with the
  // service's message.
  // `host`: the lab host whose engine makes the container (empty: the service's first host).
  Result<docker::GpuLease> lease(const std::string& name, int gpu_count, bool ssh_port,
                                 const std::string& host = {}) const;
  // POST /api/v1/gpu-docker/leases/release.
  Status release(const std::string& name) const;

 private:
  ServiceClient(std::string url, std::string token, std::shared_ptr<docker::HttpTransport> t)
      : url_(std::move(url)), token_(std::move(token)), transport_(std::move(t)) {}
  Result<Json> call(const std::string& method, const std::string& path, const Json* body,
                    int timeout_ms) const;
  std::string url_, token_;
  std::shared_ptr<docker::HttpTransport> transport_;
};

}  // namespace gpulab::builder
