// RefusalAudit: the audit lines of refused requests, rate-capped per minute.
#include "service/http/refusal_audit.h"

#include <fmt/format.h>

namespace gpulab::service {

std::string request_target(const ApiRequest& request) {
  if (auto it = request.query.find("name"); it != request.query.end()) return it->second;
  if (request.body.empty() || request.body.size() > 64 * 1024) return {};
  Json j = Json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("name") && j["name"].is_string())
    return j["name"].get<std::string>().substr(0, 200);
  return {};
}

void RefusalAudit::record(const ApiRequest& request, const std::string& user,
                          const std::string& route, const ErrorReply& error) {
  const auto now = std::chrono::steady_clock::now();
  int flushed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (now - window_start_ >= std::chrono::minutes(1)) {
      flushed = suppressed_;
      window_start_ = now;
      written_ = 0;
      suppressed_ = 0;
    }
    if (written_ >= kRefusalsPerMinute) {
      ++suppressed_;
      return;
    }
    ++written_;
  }
  if (flushed > 0)
    store_.audit("gpulab", "refusals-suppressed", "", "suppressed",
                 fmt::format("{} more refused requests in the minute before, past {} a minute",
                             flushed, kRefusalsPerMinute));
  store_.audit(user.empty() ? "(unauthenticated)" : user, request.method + " " + route,
               request_target(request), "refused",
               fmt::format("{}: {} (from {})", api_code_name(error.api_code), error.message,
                           request.remote.empty() ? "unknown" : request.remote));
}

}  // namespace gpulab::service
