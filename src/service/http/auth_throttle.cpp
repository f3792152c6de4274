// The per-address back-off of auth_throttle.h.
#include "service/http/auth_throttle.h"

#include <algorithm>
#include <cstdint>

namespace gpulab::service {

namespace {
// Bounds the table: a scan of many addresses cannot grow it without limit.
constexpr std::size_t kMaxAddresses = 100000;
}  // namespace

int AuthThrottle::retry_after_s(const std::string& address, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_address_.find(address);
  if (it == by_address_.end() || it->second.blocked_until <= now) return 0;
  auto left = std::chrono::ceil<std::chrono::seconds>(it->second.blocked_until - now);
  return static_cast<int>(std::max<std::chrono::seconds::rep>(1, left.count()));
}

void AuthThrottle::failed(const std::string& address, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_address_.size() >= kMaxAddresses) prune(now);
  Entry& e = by_address_[address];
  if (e.failures > 0 && now - e.last_failure > forget_after_) e = Entry{};
  ++e.failures;
  e.last_failure = now;
  int over = e.failures - free_failures_;
  if (over <= 0) return;
  // 1 s, 2 s, 4 s, ... (the shift is bounded before it could overflow)
  auto wait = std::chrono::seconds(std::int64_t{1} << std::min(over - 1, 20));
  e.blocked_until = now + std::min<std::chrono::seconds>(wait, max_wait_);
}

void AuthThrottle::succeeded(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  by_address_.erase(address);
}

void AuthThrottle::prune(Clock::time_point now) {
  std::erase_if(by_address_, [&](const auto& kv) {
    return kv.second.blocked_until <= now && now - kv.second.last_failure > forget_after_;
  });
  if (by_address_.size() >= kMaxAddresses) by_address_.clear();  // a flood of addresses: start over
}

}  // namespace gpulab::service
