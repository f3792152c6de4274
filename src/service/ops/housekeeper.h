// The service's timed chores on one thread: every idle_check_interval_seconds it charges held
// GPUs (usage_meter.h) and runs an idle-reclaim pass (idle_reclaim.h) on fresh GPU samples.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "service/ops/policies/idle_reclaim.h"

namespace gpulab::service {

class Housekeeper {
 public:
  explicit Housekeeper(Service& s) : s_(s), reclaimer_(s) {}
  ~Housekeeper() { stop(); }
  void start();
  void stop();
  // One round now (meter tick, then idle reclaim).
  void run_once();

 private:
  Service& s_;
  IdleReclaimer reclaimer_;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace gpulab::service
