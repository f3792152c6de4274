// One machine of the lab as the service sees it: its config, its engine (null until it first
// answers), its GPUs, and whether its engine answers now (the host monitor keeps that current).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "service/base/config.h"
#include "service/engine/engine.h"
#include "service/engine/inventory.h"

namespace gpulab::service {

class Host {
 public:
  Host(HostConfig config, const ServiceConfig& service);

  const std::string& name() const { return config_.name; }
  const HostConfig& config() const { return config_; }
  const ServiceInventory& inventory() const { return inventory_; }
  // Where users reach this host's published ports: `address`, else the URL's host, else "".
  std::string address() const;
  // A unix-socket host is this machine: a port free here is free there (bind probes apply).
  bool local() const { return local_; }

  bool up() const { return up_.load(); }
  std::string down_reason() const;
  // The engine, or null when it never answered. Once set it is never replaced, so a reference
  // taken from it stays valid.
  const Engine* engine() const;

  // Connects when not yet connected, pings, and records up/down; true when it changed.
  // `returning` runs when a down host answers, before it is marked up: no request can use the
  // engine yet, so what it finds there unowned is left over from before (internal_images.h).
  bool check(const std::function<void(const Engine&)>& returning = {});
  // Connects (start-up); the error when the engine does not answer.
  Status connect();

 private:
  void set_down(const std::string& why);
  HostConfig config_;
  ServiceConfig engine_config_;  // the service's config as this host's engine sees it
  ServiceInventory inventory_;
  bool local_ = false;
  std::string url_host_;  // tcp: the URL's host
  mutable std::mutex mu_;
  std::unique_ptr<Engine> engine_;  // guarded by mu_ until set
  std::atomic<bool> up_{false};
  std::string down_reason_ = "not connected yet";
};

}  // namespace gpulab::service
