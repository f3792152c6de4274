// Keeps the book in step with every host between reconcile passes: one thread per host follows
// its engine's event stream (containers that die, stop, start or are removed outside the
// service), and one thread runs the reconcile pass, on an event or every period.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "service/ops/service.h"

namespace gpulab::service {

class EventWatcher {
 public:
  explicit EventWatcher(Service& s) : s_(s) {}
  ~EventWatcher() { stop(); }
  void start();
  void stop();

 private:
  void reconcile_loop();
  void follow(const Host& h);
  // Waits up to `seconds` or until stopped; true when stopped.
  bool wait_stopped(int seconds);
  Service& s_;
  std::atomic<bool> cancel_{false};
  std::thread reconciler_;
  std::vector<std::thread> streams_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;  // an event came since the last pass; guarded by mu_
};

}  // namespace gpulab::service
