// Refused host ports: which port a refusal names, and holding a refused SSH port back.
#include "service/ops/containers/refused_port.h"

#include <cctype>

#include "core/log.h"
#include "service/base/clock.h"
#include "service/store/refused_ports.h"

namespace gpulab::service {

namespace {
// How long a port its engine refused is held back (after this it is offered again, at the cost
// of one more refusal if it is still taken).
constexpr double kRefusedPortHoldSeconds = 600;
}  // namespace

bool names_port(const std::string& why, int port) {
  if (port == 0) return false;
  const std::string p = ":" + std::to_string(port);
  for (size_t at = why.find(p); at != std::string::npos; at = why.find(p, at + 1)) {
    const size_t end = at + p.size();
    if (end == why.size() || !std::isdigit(static_cast<unsigned char>(why[end]))) return true;
  }
  return false;
}

void hold_back_refused_ssh_port(Service& s, const std::string& host, int port) {
  hold_refused_port(*s.store, host, port, unix_now_precise() + kRefusedPortHoldSeconds);
  spdlog::warn(
      "host '{}' refused SSH port {} as taken outside this service (a stale allocation of its "
      "engine, or a container started there outside the service): not offered there for {:.0f} "
      "s",
      host, port, kRefusedPortHoldSeconds);
}

std::string ssh_port_change(int from, int to) {
  return "ssh_port " + std::to_string(from) + " -> " + std::to_string(to);
}

}  // namespace gpulab::service
