// Everything a request handler needs, in one place: config, the book (store), the engine, the GPU
// inventory, auth, metrics, and the locks that make allocation and per-container work atomic.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "docker/client.h"
#include "service/auth.h"
#include "service/clock.h"
#include "service/config.h"
#include "service/gpu_allocator.h"
#include "service/inventory.h"
#include "service/metrics.h"
#include "service/store.h"

namespace gpulab::service {

struct Service {
  ServiceConfig config;
  std::unique_ptr<Store> store;
  std::optional<docker::Client> engine;
  ServiceInventory inventory;
  Metrics metrics;
  std::unique_ptr<Auth> auth;
  AllocationPolicy policy = AllocationPolicy::kPack;
  std::mutex alloc_mu;  // choose + record GPUs and ports: one decision at a time
  std::shared_ptr<Clock> clock = std::make_shared<SystemClock>();  // metering, idle reclaim

  // The engine client, or ENGINE_UNAVAILABLE.
  const docker::Client& docker() const;

  // Serializes operations on one container name (delete vs backup vs update).
  std::unique_lock<std::mutex> lock_container(const std::string& name);

 private:
  std::mutex names_mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> name_locks_;
};

// Opens the store, builds the inventory, seeds users, connects the engine (config.docker_host).
std::unique_ptr<Service> open_service(const ServiceConfig& config);

// Turns an engine failure into the API's error (PORT_CONFLICT, ENGINE_UNAVAILABLE, ...).
[[noreturn]] void throw_engine_error(const Error& e);

}  // namespace gpulab::service
