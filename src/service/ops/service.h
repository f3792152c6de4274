// Everything a request handler needs, in one place: config, the book (store), the engine, the GPU
// inventory, auth, metrics, and the locks that make allocation and per-container work atomic.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "service/base/clock.h"
#include "service/base/config.h"
#include "service/base/metrics.h"
#include "service/domain/gpu_allocator.h"
#include "service/engine/engine.h"
#include "service/engine/inventory.h"
#include "service/http/auth.h"
#include "service/ops/hosts/background_calls.h"
#include "service/ops/hosts/engine_id_book.h"
#include "service/ops/hosts/host.h"
#include "service/ops/images/image_claims.h"
#include "service/store/store.h"

namespace gpulab::service {

struct Service {
  ServiceConfig config;
  std::unique_ptr<Store> store;
  // The lab's hosts in config order (lab_hosts); hosts[0] holds the images of snapshots and
  // backups restored without a host. One host "local" unless the config lists hosts.
  std::vector<std::unique_ptr<Host>> hosts;
  Metrics metrics;
  std::unique_ptr<Auth> auth;
  AllocationPolicy policy = AllocationPolicy::kPack;
  std::mutex alloc_mu;  // choose + record GPUs and ports: one decision at a time
  std::shared_ptr<Clock> clock = std::make_shared<SystemClock>();  // metering, idle reclaim
  ImageClaims image_claims;  // internal images committed but not yet owned by a row
  EngineIdBook engine_ids;   // which host owns each engine: one engine never under two names
  // Engine calls still running after their request stopped waiting (host_fanout.h); declared
  // after hosts, so it is destroyed, waiting for them, before the engines they use.
  BackgroundCalls background;

  // The first host's engine, or ENGINE_UNAVAILABLE.
  const Engine& engine() const;
  // The named host's engine; ENGINE_UNAVAILABLE (503) naming it while it is down.
  const Engine& engine_on(const std::string& host) const;
  // The container's host's engine; ENGINE_UNAVAILABLE also when its host is no longer in the
  // config (the book keeps the row, its GPUs and ports, until the host is back or an admin
  // forgets it: forget_host.h).
  const Engine& engine_of(const ContainerRecord& c) const;
  // The host of that name; null for an unknown one.
  Host* find_host(const std::string& name) const;
  // Whether to ask this host's engine now: connected, up and responsive (the one host of a lab
  // without a hosts list is always asked, as before hosts existed: its own errors say what is
  // wrong).
  bool usable(const Host& h) const {
    return h.engine() && ((h.up() && h.responsive()) || hosts.size() == 1);
  }
  // Every host's GPUs now (GpuSlot::host says whose; a probe adds a host's as it finds them),
  // with the first host's source and note that has any, and the type over all of them.
  ServiceInventory inventory() const;
  // Live GPU samples from the hosts this machine can sample (the local socket's); may be empty.
  std::vector<GpuSample> sample_gpus() const;
  // After `h`'s probe: warns of each GPU whose UUID another host has too (two host entries for
  // one server). Safe as it is: the book holds a GPU by UUID lab-wide, so one container has it.
  void warn_gpus_also_on_other_hosts(const Host& h) const;

  // Serializes operations on one container name (delete vs backup vs update).
  std::unique_lock<std::mutex> lock_container(const std::string& name);

 private:
  std::mutex names_mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> name_locks_;
};

// Opens the store, seeds users, connects the engine (config.docker_host) and takes its GPUs.
// `open`: how each host's engine is opened (open_host_engine when empty).
std::unique_ptr<Service> open_service(const ServiceConfig& config, EngineOpener open = {});

// `e`'s snapshots and image archives for `what` ("snapshots", "backups", "moves"); UNSUPPORTED
// saying so when its backend has none.
const EngineArchives& require_archives(const Engine& e, const std::string& what);

// Turns an engine failure into the API's error (PORT_CONFLICT, ENGINE_UNAVAILABLE, ...).
[[noreturn]] void throw_engine_error(const Error& e);

}  // namespace gpulab::service
