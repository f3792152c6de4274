// One machine of the lab as the service sees it: its config, its engine (null until it first
// answers), its GPUs (declared, or found through its engine by a probe), and whether its engine
// answers now (the host monitor keeps that current).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "service/base/config.h"
#include "service/engine/engine.h"
#include "service/engine/inventory.h"

namespace gpulab::service {

class Host {
 public:
  // `open`: how its engine is opened (open_host_engine when empty).
  Host(HostConfig config, const ServiceConfig& service, EngineOpener open = {});

  const std::string& name() const { return config_.name; }
  const HostConfig& config() const { return config_; }
  // Its GPUs now, a snapshot: a probe may replace them (the engine's, once connected).
  std::shared_ptr<const ServiceInventory> inventory() const;
  // Where users reach this host's published ports: `address`, else the URL's host, else "".
  std::string address() const;
  // A unix-socket host is this machine: a port free here is free there (bind probes apply).
  bool local() const { return local_; }

  bool up() const { return up_.load(); }
  std::string down_reason() const;
  // Up, but a call to its engine found no answer within host_answer_seconds since its last good
  // ping: requests leave it out as if down (a 503 naming it) until the host monitor's next ping
  // answers, so a hung engine costs at most one caller that wait.
  bool responsive() const { return !hung_.load(); }
  // Set when it answers again; cleared by the first reconcile pass that saw its containers, so
  // restart_on_host_return acts even when the pass at the return missed the host (a listing
  // slower than its budget while the engine starts).
  void set_returned(bool returned) { returned_ = returned; }
  bool returned() const { return returned_.load(); }
  std::string unresponsive_reason() const;
  void mark_unresponsive(const std::string& why);
  // "up", "unresponsive" or "down": the host's state in answers.
  std::string state() const;
  // Its engine's live-restore as last asked (when it connected or came back); nullopt: unknown.
  std::optional<bool> live_restore() const;
  // The engine, or null when it never answered. Once set it is never replaced, so a reference
  // taken from it stays valid.
  const Engine* engine() const;

  // Connects when not yet connected, pings, and records up/down; true when it changed.
  // `returning` runs when a down host answers, before it is marked up: no request can use the
  // engine yet, so what it finds there unowned is left over from before (internal_images.h).
  bool check(const std::function<void(const Engine&)>& returning = {});
  // Connects (start-up); the error when the engine does not answer.
  Status connect();
  // Asked before a host that answers is marked up, after start-up (the first answer of a host
  // that was down at start, or a return): an error keeps it down with that reason.
  using Admission = std::function<Status(const Host&, const Engine&)>;
  void set_admission(Admission admit) { admit_ = std::move(admit); }

  // Whether its GPUs are found through its engine: none declared, and a probe image set.
  bool probed() const { return !probe_.image.empty(); }
  const GpuProbe& probe() const { return probe_; }
  // The probe for /healthz: "pending" (not run yet), "ok" or "failed", and why it failed.
  struct ProbeState {
    std::string state, error;
  };
  ProbeState probe_state() const;
  // Probes through the engine when it is connected and a probe is due: never run yet, the host
  // just came back (`returning`), or the last one failed probe_retry_seconds ago. Logs the
  // outcome; a failure keeps the GPUs as they were. Returns at once for a host not probed.
  // True when a probe ran and found GPUs.
  bool probe_if_due(bool returning = false);

 private:
  // Down or unresponsive: its calls in flight with no answer for host_answer_seconds end now.
  void set_down(const std::string& why);
  void abandon_stalled_calls() const;
  HostConfig config_;
  EngineOpener open_;
  Admission admit_;              // set once, before the host monitor starts
  ServiceConfig engine_config_;  // the service's config as this host's engine sees it
  std::shared_ptr<const ServiceInventory> inventory_;  // until the engine answers
  GpuProbe probe_;                                     // image empty: not probed
  int probe_retry_seconds_ = 60;
  std::mutex probe_run_mu_;      // one probe at a time
  mutable std::mutex probe_mu_;  // guards the fields below (never held during a probe)
  bool probe_tried_ = false, probe_ok_ = false;
  std::string probe_error_;
  std::chrono::steady_clock::time_point probe_at_{};
  bool local_ = false;
  std::string url_host_;  // tcp: the URL's host
  mutable std::mutex mu_;
  std::unique_ptr<Engine> engine_;  // guarded by mu_ until set
  std::atomic<bool> up_{false};
  std::atomic<bool> hung_{false};
  std::atomic<bool> returned_{false};
  std::string down_reason_ = "not connected yet";
  std::string hung_reason_;           // guarded by mu_
  std::optional<bool> live_restore_;  // guarded by mu_
  void note_live_restore(const Engine& e);
};

}  // namespace gpulab::service
