// The event streams and the reconcile loop (event_watcher.h).
#include "service/ops/hosts/event_watcher.h"

#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "service/base/clock.h"
#include "service/ops/hosts/reconciler.h"

namespace gpulab::service {

namespace {

// A stream is reopened this often, so a host whose engine restarted is followed again soon.
constexpr int kStreamSeconds = 60;

}  // namespace

void EventWatcher::start() {
  cancel_ = false;
  reconciler_ = std::thread([this] { reconcile_loop(); });
  for (const auto& h : s_.hosts) streams_.emplace_back([this, hp = h.get()] { follow(*hp); });
}

void EventWatcher::stop() {
  cancel_ = true;
  cv_.notify_all();
  for (auto& t : streams_)
    if (t.joinable()) t.join();
  streams_.clear();
  if (reconciler_.joinable()) reconciler_.join();
}

bool EventWatcher::wait_stopped(int seconds) {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, std::chrono::seconds(seconds), [this] { return cancel_.load(); });
}

void EventWatcher::reconcile_loop() {
  // Events cover the hosts that answer; the period is the backstop for what a stream missed
  // (shorter with several hosts: more streams, more chances to miss one).
  const int period = s_.config.reconcile_interval_seconds * (s_.hosts.size() > 1 ? 1 : 6);
  while (!cancel_) {
    try {
      reconcile(s_, false);
    } catch (const Exception& e) {
      spdlog::warn("reconcile: {}", e.error().message);
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::seconds(std::max(1, period)),
                 [this] { return cancel_.load() || dirty_; });
    dirty_ = false;
  }
}

void EventWatcher::follow(const Host& h) {
  EventQuery f;
  f.labels = {"gpulab.managed=true"};
  f.actions = {"die", "destroy", "start", "stop"};
  // Each stream starts where the last one ended: the engine replays what came in between.
  f.since = unix_now();
  // From here no event of this host is missed: tests wait for one per host before acting.
  s_.metrics.increment("event_watchers_started");
  while (!cancel_) {
    const Engine* e = h.up() ? h.engine() : nullptr;
    if (!e) {  // down: the host monitor reconciles when it answers again
      if (wait_stopped(s_.config.host_check_seconds)) return;
      continue;
    }
    f.until = unix_now() + kStreamSeconds;
    const auto opened = std::chrono::steady_clock::now();
    Status st = ok_status();
    try {
      st = e->watch_events(
          f,
          [this, &h](const EngineEvent& ev) {
            spdlog::debug("engine event on {}: {} {}", h.name(), ev.action, ev.container_name);
            {
              std::lock_guard<std::mutex> lk(mu_);
              dirty_ = true;
            }
            cv_.notify_all();
            return !cancel_;
          },
          &cancel_);
    } catch (const Exception& ex) {
      st = ex.error();
    }
    if (st) {
      f.since = f.until;
      // An engine whose clock runs ahead ends a stream at once: do not spin on it.
      if (std::chrono::steady_clock::now() - opened < std::chrono::seconds(1) && wait_stopped(1))
        return;
      continue;
    }
    spdlog::warn("engine events from {}: {}", h.name(), st.error().message);
    if (wait_stopped(s_.config.reconcile_interval_seconds)) return;
  }
}

}  // namespace gpulab::service
