// The bounded event log behind the dashboard's event streams.
#include "service/base/event_hub.h"

namespace gpulab::service {

std::uint64_t EventHub::publish(const std::string& topic, const Json& data) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(HubEvent{++last_, topic, data.dump()});
  while (events_.size() > keep_) events_.pop_front();
  return last_;
}

std::uint64_t EventHub::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

std::vector<HubEvent> EventHub::since(std::uint64_t seq, bool& gap) const {
  std::lock_guard<std::mutex> lock(mu_);
  gap = !events_.empty() && events_.front().seq > seq + 1;
  std::vector<HubEvent> out;
  for (const auto& e : events_)
    if (e.seq > seq) out.push_back(e);
  return out;
}

}  // namespace gpulab::service
