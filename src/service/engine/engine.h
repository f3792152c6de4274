// The one interface through which the service reaches a container engine, cut by role:
// containers, images, events, GPU leases, the host's GPUs (found on the host through the engine
// itself when the config declares none), and snapshots and image archives where the backend has
// them. The Docker adapter
// (docker_engine.h) is one implementation; docs/engines.md says how a Kubernetes one would fit.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "service/engine/engine_types.h"
#include "service/engine/inventory.h"

namespace gpulab::service {

// Errors are gpulab codes (throw_engine_error maps them to the API's): kNotFound for an unknown
// container or image, kAlreadyExists for a taken name, kConflict for a state or port clash,
// kUnavailable when the engine cannot be reached (hint: what to start), kTimeout, kDataError for
// an image archive the engine refuses, kUnsupported for what the backend cannot do. A reference
// is a container's id or name.
//
// The seam is cut by role, along what a backend can or cannot do (docs/engines.md's table): every
// backend has the roles Engine is made of; snapshots and image archives are a capability a
// backend may lack (Engine::archives() says so).
//
// Thread safety: every method may be called from several threads at once.

// The engine itself: what it is and whether it answers.
class EngineIdentity {
 public:
  virtual ~EngineIdentity() = default;
  virtual std::string describe() const = 0;  // "unix:///var/run/docker.sock (API 1.41)"
  virtual Status ping() const = 0;
  virtual Result<std::string> engine_id()
      const = 0;  // stable id of this engine (gpulab ddp checks it)
  virtual std::string unavailable_hint() const = 0;  // what to do when it does not answer
  // Whether the engine keeps containers running while it restarts (Docker's live-restore);
  // nullopt when it cannot be asked now.
  virtual std::optional<bool> live_restore() const = 0;
  // Its host was marked down: calls in flight that have had no answer for `idle` end now (503)
  // instead of waiting out their own limits. A backend whose calls cannot hang ignores it.
  virtual void abandon_stalled_calls(std::chrono::milliseconds idle) const {}
};

// The host's GPUs.
class EngineGpus {
 public:
  virtual ~EngineGpus() = default;
  // A snapshot: a probe may replace the engine's GPUs while a caller still holds the old ones.
  virtual std::shared_ptr<const ServiceInventory> gpus() const = 0;
  virtual std::vector<GpuSample> sample_gpus() const = 0;  // live metrics by uuid; may be empty
  // Finds the host's GPUs on the host itself, through this engine (GpuProbe: a short-lived
  // container reads the host's kernel files; nothing of it is left), and makes them this
  // engine's GPUs. On failure they stay as they were: kNotFound when the probe image is not on
  // the engine, kTimeout, kDataError when the answer is not a tree of kernel files.
  virtual Result<std::shared_ptr<const ServiceInventory>> probe_gpus(
      const GpuProbe& probe) const = 0;
};

// Lab containers: their lifecycle, limits, logs, usage and exec.
class EngineContainers {
 public:
  virtual ~EngineContainers() = default;
  // Creates and starts `spec`; a non-empty ssh_password reaches the container before its first
  // start without showing in any inspect. On failure nothing of it is left. Returns its id.
  virtual Result<std::string> run_container(const LabContainer& spec,
                                            const std::string& ssh_password) const = 0;
  // The same without the start: the container stays stopped (a move lands it so). On failure
  // nothing of it is left. Returns its id.
  virtual Result<std::string> create_container(const LabContainer& spec,
                                               const std::string& ssh_password) const = 0;
  virtual Status start_container(const std::string& ref) const = 0;
  virtual Status stop_container(const std::string& ref, int timeout_s) const = 0;
  virtual Status restart_container(const std::string& ref, int timeout_s) const = 0;
  // Removes it, stopping it first, with its anonymous storage.
  virtual Status remove_container(const std::string& ref) const = 0;
  virtual Result<EngineContainer> inspect_container(const std::string& ref) const = 0;
  // All containers (stopped ones too) carrying every label of `labels` ("key" or "key=value").
  virtual Result<std::vector<EngineContainer>> list_containers(
      const std::vector<std::string>& labels) const = 0;
  virtual Status update_container(const std::string& ref, const ResourceChange& change) const = 0;
  virtual Result<LogText> logs(const std::string& ref, const LogQuery& query) const = 0;
  virtual Result<ContainerUsage> usage(const std::string& ref) const = 0;  // must be running
  virtual Result<ExecOutput> exec(const std::string& ref,
                                  const std::vector<std::string>& cmd) const = 0;
};

// Images the engine holds.
class EngineImages {
 public:
  virtual ~EngineImages() = default;
  virtual bool image_exists(const std::string& ref) const = 0;
  virtual Result<EngineImage> inspect_image(const std::string& ref) const = 0;
  virtual Result<std::vector<EngineImage>> list_images(
      const std::vector<std::string>& labels) const = 0;
  virtual Status remove_image(const std::string& ref) const = 0;
};

// Snapshots and image archives (snapshots, backups, moves): optional, as a backend without a
// container-filesystem snapshot (Kubernetes, docs/engines.md) has none.
class EngineArchives {
 public:
  virtual ~EngineArchives() = default;
  // Keeps a container's filesystem (and its config) as image commit.repo:commit.tag; its id.
  virtual Result<std::string> commit(const std::string& container,
                                     const ImageCommit& commit) const = 0;
  // An image archive (docker save format) handed to `sink` piece by piece; sink returns false to
  // stop (the call then fails).
  virtual Status save_image(const std::string& ref,
                            const std::function<bool(std::string_view)>& sink) const = 0;
  // Loads an image archive of `size` bytes read through `read` (0 at the end); the names loaded.
  // size -1: not known ahead (another engine's save streamed through); sent in chunks.
  // An archive the engine refuses: kDataError.
  virtual Result<std::vector<std::string>> load_images(
      std::int64_t size,
      const std::function<Result<std::size_t>(char*, std::size_t)>& read) const = 0;
};

// Changes to containers as they happen.
class EngineEvents {
 public:
  virtual ~EngineEvents() = default;
  // Calls on_event for each matching change until it returns false, `cancel` turns true or
  // query.until passes (all success); an error when the stream cannot be had or breaks.
  virtual Status watch_events(const EventQuery& query,
                              const std::function<bool(const EngineEvent&)>& on_event,
                              const std::atomic<bool>* cancel) const = 0;
};

// GPU leases (gpulab ddp makes the container on this engine itself).
class EngineLeases {
 public:
  virtual ~EngineLeases() = default;
  // The lease as its taker reads it: with `attach`, in the engine's own terms how to attach them.
  virtual Json lease_json(const LeaseFacts& lease) const = 0;
  // Uuids of our GPUs held by containers made without the service or a lease (gpulab ddp
  // --no-service); empty when the engine cannot be asked.
  virtual std::vector<std::string> gpus_held_outside() const = 0;
};

// One backend: every role, and the optional ones it has.
class Engine : public EngineIdentity,
               public EngineGpus,
               public EngineContainers,
               public EngineImages,
               public EngineEvents,
               public EngineLeases {
 public:
  // Its snapshots and image archives; null when the backend has none.
  virtual const EngineArchives* archives() const = 0;
};

// `engine`'s archives, or kUnsupported saying that this backend keeps no snapshots (for `what`:
// "snapshots", "backups", "moves", "a GPU count change").
Result<const EngineArchives*> archives_of(const Engine& engine, const std::string& what);

// The engine of one lab host (config.hosts, or the one host of a lab without them, whose empty
// URL means $DOCKER_HOST or the local socket), with `inventory` as its GPUs: the local socket,
// or tcp with the host's mutual TLS files. kUnavailable naming the host if it does not answer.
// Every wait on it is bounded by config.host_answer_seconds; `on_hung` hears of each call that
// found no answer within it (the host is hung).
Result<std::unique_ptr<Engine>> open_host_engine(
    const ServiceConfig& config, const HostConfig& host, ServiceInventory inventory,
    std::function<void(const std::string&)> on_hung = {});

// How the service opens a host's engine: open_host_engine, or another backend of this seam (the
// unit tests' in-memory one, tests/service/fake_engine.h).
using EngineOpener = std::function<Result<std::unique_ptr<Engine>>(
    const ServiceConfig&, const HostConfig&, ServiceInventory,
    std::function<void(const std::string&)>)>;

}  // namespace gpulab::service
