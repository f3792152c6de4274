// The dashboard's GPU history: a fixed-size ring buffer of samples per GPU (the last hour by
// default), read back as columns that a time-series chart draws directly.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace gpulab::service {

struct GpuPoint {
  std::int64_t t_ms = 0;  // wall clock, milliseconds since the epoch
  bool held = false;      // a container holds the GPU
  std::optional<double> utilization_percent, memory_used_bytes, memory_total_bytes, temperature_c,
      power_w;
};

class GpuHistory {
 public:
  explicit GpuHistory(std::size_t capacity);
  std::size_t capacity() const { return capacity_; }
  // Appends a sample; the oldest one goes once the GPU has `capacity` of them.
  void add(const std::string& uuid, const GpuPoint& p);
  std::size_t size(const std::string& uuid) const;
  // Oldest first: {"t": [seconds], "held": [0|1], "utilization_percent": [v|null], ...} for the
  // samples newer than since_ms.
  Json columns(const std::string& uuid, std::int64_t since_ms = 0) const;

 private:
  struct Ring {
    std::vector<GpuPoint> points;
    std::size_t next = 0;  // where the next sample goes once the ring is full
  };
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, Ring> rings_;
};

}  // namespace gpulab::service
