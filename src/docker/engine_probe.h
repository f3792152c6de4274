// Is a Docker engine answering at an endpoint? One GET /_ping with a short deadline, over the
// client's transport (unix socket, TCP, TLS), for `gpulab detect`'s host readiness report.
#pragma once

#include <chrono>
#include <string>

#include "docker/http_transport.h"

namespace gpulab::docker {

struct EngineProbe {
  std::string endpoint;    // as configured: "unix:///var/run/docker.sock", "tcp://h:2376"
  bool reachable = false;  // GET /_ping answered 200 OK
  std::string detail;      // why not, or "API <version>" the engine announced
};

// Pings `endpoint`; never throws, a failure is in `detail`.
EngineProbe probe_engine(const Endpoint& endpoint,
                         std::chrono::milliseconds timeout = std::chrono::seconds(2));
// The engine $DOCKER_HOST names (with DOCKER_TLS_VERIFY / DOCKER_CERT_PATH), or the default socket.
EngineProbe probe_engine_from_env(std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace gpulab::docker
