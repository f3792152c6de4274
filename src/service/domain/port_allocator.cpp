// Port choice and host bind probes for SSH and user port mappings.
#include "service/domain/port_allocator.h"

#include <algorithm>
#include <cmath>

namespace gpulab::service {

std::vector<int> taken_ports(const std::vector<int>& wanted, const std::set<int>& unavailable,
                             const PortProbe& probe) {
  std::vector<int> taken;
  for (int p : wanted) {
    if (unavailable.count(p) || (probe && !probe(p))) taken.push_back(p);
  }
  return taken;
}

std::string port_conflict_message(const std::vector<int>& ports) {
  std::string s = "Port(s) already in use: [";
  for (size_t i = 0; i < ports.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ports[i]);
  }
  return s + "]";
}

std::string port_resting_message(const std::map<int, double>& resting) {
  std::string s = "Port(s) resting after release: [";
  double longest = 0;
  for (const auto& [port, left] : resting) {
    if (s.back() != '[') s += ", ";
    s += std::to_string(port);
    longest = std::max(longest, left);
  }
  return s + "] (free again in " + std::to_string(static_cast<long>(std::ceil(longest))) + " s)";
}

}  // namespace gpulab::service
