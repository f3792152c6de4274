// Local-time ISO 8601 stamps with a "+HH:MM" offset, as the seed's status answer shows them.
#include "service/base/clock.h"

#include <chrono>
#include <cstdio>
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

std::int64_t parse_iso_time(const std::string& text) {
  std::tm tm{};
  int oh = 0, om = 0;
  char sign = '+';
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d%c%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &sign, &oh, &om) != 9 ||
      (sign != '+' && sign != '-'))
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::int64_t offset = (oh * 3600 + om * 60) * (sign == '-' ? -1 : 1);
  return static_cast<std::int64_t>(timegm(&tm)) - offset;
}

std::string iso_now() {
  return iso_time(unix_now());
}

}  // namespace gpulab::service
