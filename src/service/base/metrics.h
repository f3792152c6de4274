// Prometheus text exposition: request counters and latency histograms by route, event counters
// (allocation failures, reconciler fixes), and gauges the caller adds at scrape time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gpulab::service {

class Metrics {
 public:
  void observe_request(const std::string& method, const std::string& route, int status,
                       double seconds);
  // A counter named gpulab_<name>_total, with an optional single label value.
  void increment(const std::string& name, const std::string& label_key = {},
                 const std::string& label_value = {});
  // A histogram gpulab_<name>_seconds with one label, for the parts of a request (how long a
  // create spends placing vs in the engine: name "create_phase", label phase="place").
  void observe(const std::string& name, const std::string& label_key,
               const std::string& label_value, double seconds);
  // The counters and histograms in Prometheus text format.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests_;
  struct Histogram {
    std::vector<std::uint64_t> buckets;
    double sum = 0;
    std::uint64_t count = 0;
  };
  static std::string histogram_lines(const std::string& name,
                                     const std::pair<std::string, std::string>& label,
                                     const Histogram& h);
  std::map<std::string, Histogram> latency_;                                      // by route
  std::map<std::tuple<std::string, std::string, std::string>, Histogram> parts_;  // observe()
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> counters_;
};

// Times the parts of one request into Metrics::observe: each lap() records the time since the
// previous one (or the start) under its label value.
class PhaseTimer {
 public:
  PhaseTimer(Metrics& m, std::string name, std::string label_key)
      : m_(m),
        name_(std::move(name)),
        key_(std::move(label_key)),
        last_(std::chrono::steady_clock::now()) {}
  void lap(const std::string& phase) {
    auto now = std::chrono::steady_clock::now();
    m_.observe(name_, key_, phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  Metrics& m_;
  std::string name_, key_;
  std::chrono::steady_clock::time_point last_;
};

// Writes one gauge sample line: name{labels} value.
std::string gauge_line(const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& labels,
                       double value);
// "# HELP" and "# TYPE" lines.
std::string metric_header(const std::string& name, const std::string& type,
                          const std::string& help);

}  // namespace gpulab::service
