// Refused requests in the audit log: every refused change (anything but GET that ended in an
// error) and every refused authentication, with who asked, the route, the container or user it
// named, the error code and the peer address. A flood is not written line by line: past
// kRefusalsPerMinute a minute, refusals are counted and the count is written once.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "service/base/api_error.h"
#include "service/http/router.h"
#include "service/store/store.h"

namespace gpulab::service {

inline constexpr int kRefusalsPerMinute = 120;

class RefusalAudit {
 public:
  explicit RefusalAudit(Store& store) : store_(store) {}
  void record(const ApiRequest& request, const std::string& user, const std::string& route,
              const ErrorReply& error);

 private:
  Store& store_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int written_ = 0;
  int suppressed_ = 0;
};

// The name a request is about: its "name" query or path parameter, else the "name" of its JSON
// body; "" when it has none.
std::string request_target(const ApiRequest& request);

}  // namespace gpulab::service
