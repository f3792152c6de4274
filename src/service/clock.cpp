// Local-time ISO 8601 stamps with a "+HH:MM" offset, as the seed's status answer shows them.
#include "service/clock.h"

#include <chrono>
#include <ctime>

namespace gpulab::service {

std::string iso_time(std::int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  std::string s(buf);
  // strftime gives "+0800"; ISO 8601 extended form wants "+08:00".
  if (s.size() >= 5) s = s.substr(0, s.size() - 2) + ":" + s.substr(s.size() - 2);
  return s;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double unix_now_precise() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string iso_now() {
  return iso_time(unix_now());
}

}  // namespace gpulab::service
