// The Docker adapter of the engine seam: the one place in the service that speaks the Docker
// Engine API (through docker::Client), translating the service's terms (engine_types.h) to it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "docker/client.h"
#include "docker/lab_engine.h"
#include "service/engine/engine.h"

namespace gpulab::service {

// Docker keeps snapshots (commit) and image archives (save, load): it has that capability too.
class DockerEngine : public Engine, public EngineArchives {
 public:
  // `config` says how GPUs are attached (device_mode, AMD paths); `inventory` is this host's.
  // Published ports bind on `bind_ip` of the engine's machine.
  DockerEngine(docker::Client client, ServiceConfig config, ServiceInventory inventory,
               std::string bind_ip = "0.0.0.0");

  std::string describe() const override;
  Status ping() const override;
  Result<std::string> engine_id() const override;
  std::optional<bool> live_restore() const override;
  std::string unavailable_hint() const override;
  void abandon_stalled_calls(std::chrono::milliseconds idle) const override;

  std::shared_ptr<const ServiceInventory> gpus() const override;
  std::vector<GpuSample> sample_gpus() const override;
  Result<std::shared_ptr<const ServiceInventory>> probe_gpus(const GpuProbe& probe) const override;

  Result<std::string> run_container(const LabContainer& spec,
                                    const std::string& ssh_password) const override;
  Result<std::string> create_container(const LabContainer& spec,
                                       const std::string& ssh_password) const override;
  Status start_container(const std::string& ref) const override;
  Status stop_container(const std::string& ref, int timeout_s) const override;
  Status restart_container(const std::string& ref, int timeout_s) const override;
  Status remove_container(const std::string& ref) const override;
  Result<EngineContainer> inspect_container(const std::string& ref) const override;
  Result<std::vector<EngineContainer>> list_containers(
      const std::vector<std::string>& labels) const override;
  Status update_container(const std::string& ref, const ResourceChange& change) const override;
  Result<LogText> logs(const std::string& ref, const LogQuery& query) const override;
  Result<ContainerUsage> usage(const std::string& ref) const override;
  Result<ExecOutput> exec(const std::string& ref,
                          const std::vector<std::string>& cmd) const override;

  bool image_exists(const std::string& ref) const override;
  Result<EngineImage> inspect_image(const std::string& ref) const override;
  Result<std::vector<EngineImage>> list_images(
      const std::vector<std::string>& labels) const override;
  Status remove_image(const std::string& ref) const override;

  const EngineArchives* archives() const override { return this; }
  Result<std::string> commit(const std::string& container,
                             const ImageCommit& commit) const override;
  Status save_image(const std::string& ref,
                    const std::function<bool(std::string_view)>& sink) const override;
  Result<std::vector<std::string>> load_images(
      std::int64_t size,
      const std::function<Result<std::size_t>(char*, std::size_t)>& read) const override;

  Status watch_events(const EventQuery& query,
                      const std::function<bool(const EngineEvent&)>& on_event,
                      const std::atomic<bool>* cancel) const override;

  Json lease_json(const LeaseFacts& lease) const override;
  std::vector<std::string> gpus_held_outside() const override;

  // The engine's create request for `spec` (ports, limits, GPUs by this engine's attachment).
  docker::CreateSpec create_spec(const LabContainer& spec) const;

 private:
  // The probe's container run and its tree fetched (docker_engine_probe.cpp).
  Result<std::string> run_probe(const GpuProbe& probe) const;
  Result<std::string> fetch_probe_tree(const std::string& id, const GpuProbe& probe) const;

  docker::Client client_;
  docker::LabEngine lab_;  // the lab-container sequence gpulab ddp shares (same transport)
  ServiceConfig config_;
  mutable std::mutex inventory_mu_;
  // Replaced whole by a probe (a const call, as every engine call: the GPUs are its state).
  mutable std::shared_ptr<const ServiceInventory> inventory_;
  std::string bind_ip_;
  // Docker's /info ID never changes for an engine's data root: asked once, then kept.
  mutable std::mutex id_mu_;
  mutable std::string id_;
};

}  // namespace gpulab::service
