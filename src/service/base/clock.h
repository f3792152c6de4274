// Time stamps as the API shows them: ISO 8601 with the host's UTC offset, like the seed
// ("2025-07-05T15:01:03+08:00"), plus a monotonic-free wall clock in seconds for the store.
#pragma once

#include <cstdint>
#include <string>

namespace gpulab::service {

std::string iso_time(std::int64_t unix_seconds);
std::string iso_now();
std::int64_t unix_now();
double unix_now_precise();
// Reads back what iso_time wrote ("2025-07-05T15:01:03+08:00"); -1 when it is not that form.
std::int64_t parse_iso_time(const std::string& text);

}  // namespace gpulab::service

#include <atomic>
#include <memory>

namespace gpulab::service {

// Wall time (unix seconds) for the service's timed policies: GPU-second metering and idle
// reclaim. The service runs on SystemClock; tests inject a ManualClock so no test waits hours.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() const = 0;
};

class SystemClock final : public Clock {
 public:
  double now() const override { return unix_now_precise(); }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(double start) : t_(start) {}
  double now() const override { return t_.load(); }
  void set(double t) { t_.store(t); }
  void advance(double seconds) { t_.store(t_.load() + seconds); }

 private:
  std::atomic<double> t_;
};

}  // namespace gpulab::service
