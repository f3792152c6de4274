// The host monitor's loops (host_monitor.h).
#include "service/ops/hosts/host_monitor.h"

#include "core/log.h"
#include "service/ops/hosts/reconciler.h"
#include "service/ops/images/internal_images.h"

namespace gpulab::service {

void HostMonitor::start() {
  cancel_ = false;
  for (auto& h : s_.hosts) threads_.emplace_back([this, hp = h.get()] { watch(*hp); });
}

void HostMonitor::stop() {
  cancel_ = true;
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void HostMonitor::watch(Host& h) {
  while (!cancel_) {
    auto returning = [this, &h](const Engine& e) {
      try {
        if (int n = remove_orphan_images_on(s_, h.name(), e))
          spdlog::info("host {} is back: removed {} image(s) without an owner", h.name(), n);
      } catch (const Exception& ex) {
        spdlog::warn("orphan images on {} as it came back: {}", h.name(), ex.error().message);
      }
    };
    const bool changed = h.check(returning);
    if (changed) {
      s_.metrics.increment(h.up() ? "host_up_events" : "host_down_events");
      if (h.up()) {
        h.set_returned(true);
        try {
          reconcile(s_, false);  // containers removed or stopped while it was away
        } catch (const Exception& e) {
          spdlog::warn("reconcile after host {} came back: {}", h.name(), e.error().message);
        }
      }
    }
    // Its GPUs: first found once its engine answers, found again each time it comes back (they
    // may have changed meanwhile), and a failed probe retried now and then.
    if (h.up() && h.probe_if_due(changed)) s_.warn_gpus_also_on_other_hosts(h);
    wait_next_check(h);
  }
}

void HostMonitor::wait_next_check(const Host& h) {
  // host_check_seconds, cut short when a request finds the host hung: its ping then comes at
  // once, so it is marked down (or found answering again) without waiting for the period.
  const bool was_responsive = h.up() && h.responsive();
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(s_.config.host_check_seconds);
  std::unique_lock<std::mutex> lk(mu_);
  while (!cancel_ && std::chrono::steady_clock::now() < until) {
    if (was_responsive && !h.responsive()) return;
    cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return cancel_.load(); });
  }
}

}  // namespace gpulab::service
