// Durations as people read them; see duration.h.
#include "core/duration.h"

#include <cstdio>

namespace gpulab {

std::string human_duration(double seconds) {
  const long long s = seconds > 0 ? static_cast<long long>(seconds + 0.5) : 0;
  char buf[64];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  return buf;
}

}  // namespace gpulab
