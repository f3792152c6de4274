// An in-memory backend of the service's engine seam, for unit tests only (never in the product):
// containers, images and (optionally) snapshots kept in maps, every call counted, so allocation,
// placement, quota, move-journal and reconciler logic runs in milliseconds without a Docker
// engine. What it checks is what the seam promises of any backend (engine.h): unique names, an
// image that must be there, a host port held by one container at a time, references by name or
// full id. The integration tests keep the real engines.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "service/engine/engine.h"

namespace gpulab::service::testing {

class FakeEngine : public Engine, public EngineArchives {
 public:
  // `name`: its host's, for describe() and ids; `archives`: whether it keeps snapshots.
  FakeEngine(std::string name, ServiceInventory inventory, bool archives = true);

  // ---- what a test sets ----
  // Const as every engine call: the images are the engine's state (commit and load add them).
  void add_image(const std::string& ref, std::map<std::string, std::string> labels = {}) const;
  void set_down(bool down) { down_ = down; }  // every call fails kUnavailable, as a dead engine
  void set_held_outside(std::vector<std::string> uuids);
  // How many times `method` was called ("image_exists", "run_container", ...).
  int calls(const std::string& method) const;
  void reset_calls();
  std::size_t container_count() const;

  // ---- the seam ----
  std::string describe() const override { return "fake://" + name_; }
  Status ping() const override;
  Result<std::string> engine_id() const override;
  std::string unavailable_hint() const override { return "start the fake engine"; }
  std::optional<bool> live_restore() const override { return true; }
  void abandon_stalled_calls(std::chrono::milliseconds) const override {
    (void)enter("abandon_stalled_calls");
  }

  std::shared_ptr<const ServiceInventory> gpus() const override { return inventory_; }
  std::vector<GpuSample> sample_gpus() const override { return {}; }
  Result<std::shared_ptr<const ServiceInventory>> probe_gpus(const GpuProbe&) const override;

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

  const EngineArchives* archives() const override { return archives_ ? this : nullptr; }
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

 private:
  struct Box {
    EngineContainer info;
    std::set<int> host_ports;
  };
  struct Image {
    std::string id;
    std::map<std::string, std::string> labels;
  };
  // Counts the call; kUnavailable while down.
  Status enter(const char* method) const;
  // The container a reference means (its name or full id), under mu_.
  Box* find(const std::string& ref) const;
  Result<std::string> make(const LabContainer& spec, const char* state) const;
  Status set_state(const char* method, const std::string& ref, const char* state) const;

  std::string name_;
  std::shared_ptr<const ServiceInventory> inventory_;
  bool archives_;
  std::atomic<bool> down_{false};
  mutable std::mutex mu_;
  mutable std::map<std::string, Box> boxes_;     // by id
  mutable std::map<std::string, Image> images_;  // by "repo:tag"
  mutable std::map<std::string, int> calls_;
  mutable int next_id_ = 0;
  std::vector<std::string> held_outside_;
};

}  // namespace gpulab::service::testing
