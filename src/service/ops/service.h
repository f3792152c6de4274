// Everything a request handler needs, in one place: config, the book (store), the engine, the GPU
// inventory, auth, metrics, and the locks that make allocation and per-container work atomic.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "service/base/clock.h"
#include "service/base/config.h"
#include "service/base/metrics.h"
#include "service/domain/gpu_allocator.h"
#include "service/engine/engine.h"
#include "service/engine/inventory.h"
#include "service/http/auth.h"
#include "service/store/store.h"

namespace gpulab::service {

struct Service {
  ServiceConfig config;
  std::unique_ptr<Store> store;
  std::unique_ptr<Engine> engine_ptr;  // the engine seam (engine/engine.h); null: not connected
  ServiceInventory inventory;          // the engine's GPUs, as it reported them at start
  Metrics metrics;
  std::unique_ptr<Auth> auth;
  AllocationPolicy policy = AllocationPolicy::kPack;
  std::mutex alloc_mu;  // choose + record GPUs and ports: one decision at a time
  std::shared_ptr<Clock> clock = std::make_shared<SystemClock>();  // metering, idle reclaim

  // The engine, or ENGINE_UNAVAILABLE.
  const Engine& engine() const;
  // Live GPU samples from the engine's host; none without an engine.
  std::vector<GpuSample> sample_gpus() const;

  // Serializes operations on one container name (delete vs backup vs update).
  std::unique_lock<std::mutex> lock_container(const std::string& name);

 private:
  std::mutex names_mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> name_locks_;
};

// Opens the store, seeds users, connects the engine (config.docker_host) and takes its GPUs.
std::unique_ptr<Service> open_service(const ServiceConfig& config);

// Turns an engine failure into the API's error (PORT_CONFLICT, ENGINE_UNAVAILABLE, ...).
[[noreturn]] void throw_engine_error(const Error& e);

}  // namespace gpulab::service
