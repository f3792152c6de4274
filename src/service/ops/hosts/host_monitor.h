// Keeps each host's up/down state current: one thread per host pings its engine every
// host_check_seconds (a host that hangs does not delay the others; one a request found hung is
// pinged at once), and a host that answers again gets a reconcile pass, so what changed on it
// meanwhile reaches the book.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "service/ops/service.h"

namespace gpulab::service {

class HostMonitor {
 public:
  explicit HostMonitor(Service& s) : s_(s) {}
  ~HostMonitor() { stop(); }
  void start();
  void stop();

 private:
  void watch(Host& h);
  void wait_next_check(const Host& h);
  Service& s_;
  std::atomic<bool> cancel_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace gpulab::service
