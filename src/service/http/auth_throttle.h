// Slows down token guessing: failed token checks are counted per peer address, and past a few an
// address must wait (doubling up to a cap) before its next check is even made (429 with
// Retry-After). Other addresses are not affected.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "service/base/api_error.h"

namespace gpulab::service {

// TOO_MANY_REQUESTS for an address that must wait; the reply carries Retry-After.
class ThrottledError : public ApiError {
 public:
  ThrottledError(int retry_after_s, const std::string& address)
      : ApiError(ApiCode::kTooManyRequests,
                 "Too many failed token checks from " + address + "; wait " +
                     std::to_string(retry_after_s) + " s",
                 "check the token; each further failure doubles the wait"),
        retry_after_s_(retry_after_s) {}
  int retry_after_s() const { return retry_after_s_; }

 private:
  int retry_after_s_;
};

class AuthThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  // `free_failures` failures in a row pass unhindered; each further one makes the address wait
  // 1 s, 2 s, 4 s, ... up to `max_wait`. A success, or `forget_after` without a failure, resets.
  explicit AuthThrottle(int free_failures = 10,
                        std::chrono::seconds max_wait = std::chrono::seconds(60),
                        std::chrono::seconds forget_after = std::chrono::minutes(15))
      : free_failures_(free_failures), max_wait_(max_wait), forget_after_(forget_after) {}

  // Whole seconds `address` must still wait before a token check (0: go ahead).
  int retry_after_s(const std::string& address, Clock::time_point now = Clock::now());
  void failed(const std::string& address, Clock::time_point now = Clock::now());
  void succeeded(const std::string& address);

 private:
  struct Entry {
    int failures = 0;
    Clock::time_point last_failure{}, blocked_until{};
  };
  void prune(Clock::time_point now);  // under mu_

  int free_failures_;
  std::chrono::seconds max_wait_, forget_after_;
  std::mutex mu_;
  std::map<std::string, Entry> by_address_;
};

}  // namespace gpulab::service
