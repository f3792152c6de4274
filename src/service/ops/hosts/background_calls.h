// Counts the engine calls that outlive the request that made them (a host's answer that came
// after the request stopped waiting: host_fanout.h), so the service waits for them before its
// hosts and engines go. Each such call is bounded by its engine's own limits.
#pragma once

#include <condition_variable>
#include <mutex>

namespace gpulab::service {

class BackgroundCalls {
 public:
  BackgroundCalls() = default;
  BackgroundCalls(const BackgroundCalls&) = delete;
  BackgroundCalls& operator=(const BackgroundCalls&) = delete;
  ~BackgroundCalls() { wait(); }

  void begin() {
    std::lock_guard<std::mutex> g(mu_);
    ++running_;
  }
  void end() {
    std::lock_guard<std::mutex> g(mu_);
    if (--running_ == 0) cv_.notify_all();
  }
  // Returns once no call is running.
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return running_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
};

}  // namespace gpulab::service
