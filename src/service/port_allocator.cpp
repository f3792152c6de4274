// Port choice and host bind probes for SSH and user port mappings.
#include "service/port_allocator.h"

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

}  // namespace gpulab::service
