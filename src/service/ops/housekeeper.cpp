// The housekeeping loop; a failing round is logged and the next one tries again.
#include "service/ops/housekeeper.h"

#include <chrono>

#include "core/log.h"
#include "service/ops/policies/usage_meter.h"

namespace gpulab::service {

void Housekeeper::run_once() {
  meter_tick(*s_.store, s_.clock->now());
  auto r = reclaimer_.check(s_.sample_gpus());
  if (r.warned || r.stopped)
    spdlog::info("idle reclaim: {} checked, {} idle, {} warned, {} stopped", r.checked, r.idle,
                 r.warned, r.stopped);
}

void Housekeeper::start() {
  cancel_ = false;
  thread_ = std::thread([this] {
    while (!cancel_) {
      try {
        run_once();
      } catch (const std::exception& e) {
        spdlog::warn("housekeeping: {}", e.what());
      }
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::seconds(s_.config.idle_check_interval_seconds),
                   [this] { return cancel_.load(); });
    }
  });
}

void Housekeeper::stop() {
  cancel_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpulab::service
