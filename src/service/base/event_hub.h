// Live updates for the dashboard: a numbered, bounded log of recent events ("gpus" samples,
// "containers" and "images" changed) that each Server-Sent Events stream reads at its own pace.
// Events carry no per-user data: a client refetches through the API, which applies ownership.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "core/json.h"

namespace gpulab::service {

struct HubEvent {
  std::uint64_t seq = 0;
  std::string topic;
  std::string data;  // JSON text
};

class EventHub {
 public:
  explicit EventHub(std::size_t keep = 256) : keep_(keep) {}
  std::uint64_t publish(const std::string& topic, const Json& data);
  // The last event's number (0: none yet).
  std::uint64_t latest() const;
  // Events after `seq`, oldest first; `gap` is set when some were already dropped.
  std::vector<HubEvent> since(std::uint64_t seq, bool& gap) const;

 private:
  std::size_t keep_;
  mutable std::mutex mu_;
  std::deque<HubEvent> events_;
  std::uint64_t last_ = 0;
};

}  // namespace gpulab::service
