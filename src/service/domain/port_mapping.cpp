// The text form of a port mapping.
#include "service/domain/port_mapping.h"

namespace gpulab::service {

std::string PortMapping::to_string() const {
  std::string s = std::to_string(host_port) + ":" + std::to_string(container_port);
  if (protocol != "tcp") s += "/" + protocol;
  return s;
}

}  // namespace gpulab::service
