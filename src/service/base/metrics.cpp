// Prometheus counters and histograms kept in memory (they restart at zero with the process).
#include "service/base/metrics.h"

#include <charconv>

namespace gpulab::service {

namespace {

const double kBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};

std::string escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

// The shortest text that reads back as the same double: le="0.005", not 0.0050000000000000001.
std::string number(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

void add_sample(auto& h, double seconds) {
  if (h.buckets.empty()) h.buckets.assign(std::size(kBuckets), 0);
  for (size_t i = 0; i < std::size(kBuckets); ++i)
    if (seconds <= kBuckets[i]) ++h.buckets[i];
  h.sum += seconds;
  ++h.count;
}

}  // namespace

std::string metric_header(const std::string& name, const std::string& type,
                          const std::string& help) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string gauge_line(const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& labels,
                       double value) {
  std::string s = name;
  if (!labels.empty()) {
    s += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) s += ",";
      s += labels[i].first + "=\"" + escape(labels[i].second) + "\"";
    }
    s += "}";
  }
  return s + " " + number(value) + "\n";
}

void Metrics::observe_request(const std::string& method, const std::string& route, int status,
                              double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{method, route, status}];
  add_sample(latency_[route], seconds);
}

void Metrics::observe(const std::string& name, const std::string& label_key,
                      const std::string& label_value, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  add_sample(parts_[{name, label_key, label_value}], seconds);
}

void Metrics::increment(const std::string& name, const std::string& label_key,
                        const std::string& label_value) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_[{name, label_key, label_value}];
}

std::string Metrics::histogram_lines(const std::string& name,
                                     const std::pair<std::string, std::string>& label,
                                     const Histogram& h) {
  std::string out;
  for (size_t i = 0; i < std::size(kBuckets); ++i)
    out += gauge_line(name + "_bucket", {label, {"le", number(kBuckets[i])}},
                      static_cast<double>(h.buckets[i]));
  out += gauge_line(name + "_bucket", {label, {"le", "+Inf"}}, static_cast<double>(h.count));
  out += gauge_line(name + "_sum", {label}, h.sum);
  out += gauge_line(name + "_count", {label}, static_cast<double>(h.count));
  return out;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = metric_header("gpulab_http_requests_total", "counter",
                                  "HTTP requests by method, route and status");
  for (const auto& [key, n] : requests_) {
    const auto& [method, route, status] = key;
    out += gauge_line("gpulab_http_requests_total",
                      {{"method", method}, {"route", route}, {"status", std::to_string(status)}},
                      static_cast<double>(n));
  }
  out += metric_header("gpulab_http_request_duration_seconds", "histogram",
                       "time to answer a request, by route");
  for (const auto& [route, h] : latency_)
    out += histogram_lines("gpulab_http_request_duration_seconds", {"route", route}, h);
  std::string last;
  for (const auto& [key, h] : parts_) {
    const auto& [name, lk, lv] = key;
    std::string full = "gpulab_" + name + "_seconds";
    if (full != last) out += metric_header(full, "histogram", name + ", by " + lk);
    last = full;
    out += histogram_lines(full, {lk, lv}, h);
  }
  last.clear();
  for (const auto& [key, n] : counters_) {
    const auto& [name, lk, lv] = key;
    std::string full = "gpulab_" + name + "_total";
    if (full != last) out += metric_header(full, "counter", name + " events");
    last = full;
    if (lk.empty()) {
      out += gauge_line(full, {}, static_cast<double>(n));
    } else {
      out += gauge_line(full, {{lk, lv}}, static_cast<double>(n));
    }
  }
  return out;
}

}  // namespace gpulab::service
