// A published port as a user asks for it: host port -> container port, tcp or udp.
#pragma once

#include <string>

namespace gpulab::service {

struct PortMapping {
  int host_port = 0;
  int container_port = 0;
  std::string protocol = "tcp";
  std::string to_string() const;  // "3002:3002" (or "3002:3002/udp")
};

}  // namespace gpulab::service
