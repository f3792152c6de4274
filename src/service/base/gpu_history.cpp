// Ring buffer of GPU samples per uuid; columns() unrolls it oldest first.
#include "service/base/gpu_history.h"

#include <algorithm>

namespace gpulab::service {

GpuHistory::GpuHistory(std::size_t capacity) : capacity_(std::max<std::size_t>(1, capacity)) {}

void GpuHistory::add(const std::string& uuid, const GpuPoint& p) {
  std::lock_guard<std::mutex> lock(mu_);
  Ring& r = rings_[uuid];
  if (r.points.size() < capacity_) {
    r.points.push_back(p);
    return;
  }
  r.points[r.next] = p;
  r.next = (r.next + 1) % capacity_;
}

std::size_t GpuHistory::size(const std::string& uuid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rings_.find(uuid);
  return it == rings_.end() ? 0 : it->second.points.size();
}

namespace {

Json value_or_null(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

Json GpuHistory::columns(const std::string& uuid, std::int64_t since_ms) const {
  Json t = Json::array(), held = Json::array(), util = Json::array(), mem = Json::array(),
       mem_total = Json::array(), temp = Json::array(), power = Json::array();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rings_.find(uuid);
  if (it != rings_.end()) {
    const Ring& r = it->second;
    std::size_t n = r.points.size();
    std::size_t start = n < capacity_ ? 0 : r.next;
    for (std::size_t k = 0; k < n; ++k) {
      const GpuPoint& p = r.points[(start + k) % n];
      if (p.t_ms <= since_ms) continue;
      t.push_back(static_cast<double>(p.t_ms) / 1000.0);
      held.push_back(p.held ? 1 : 0);
      util.push_back(value_or_null(p.utilization_percent));
      mem.push_back(value_or_null(p.memory_used_bytes));
      mem_total.push_back(value_or_null(p.memory_total_bytes));
      temp.push_back(value_or_null(p.temperature_c));
      power.push_back(value_or_null(p.power_w));
    }
  }
  return {{"t", t},
          {"held", held},
          {"utilization_percent", util},
          {"memory_used_bytes", mem},
          {"memory_total_bytes", mem_total},
          {"temperature_c", temp},
          {"power_w", power}};
}

}  // namespace gpulab::service
