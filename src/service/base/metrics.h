// Prometheus text exposition: request counters and latency histograms by route, event counters
// (allocation failures, reconciler fixes), and gauges the caller adds at scrape time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace gpulab::service {

class Metrics {
 public:
  void observe_request(const std::string& method, const std::string& route, int status,
                       double seconds);
  // A counter named gpulab_<name>_total, with an optional single label value.
  void increment(const std::string& name, const std::string& label_key = {},
                 const std::string& label_value = {});
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
  std::map<std::string, Histogram> latency_;  // by route
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> counters_;
};

// Writes one gauge sample line: name{labels} value.
std::string gauge_line(const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& labels,
                       double value);
// "# HELP" and "# TYPE" lines.
std::string metric_header(const std::string& name, const std::string& type,
                          const std::string& help);

}  // namespace gpulab::service
