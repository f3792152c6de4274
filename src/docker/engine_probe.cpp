// The engine ping behind `gpulab detect`'s "Docker engine: reachable" line.
#include "docker/engine_probe.h"

#include <cstdlib>

#include "core/strings.h"

namespace gpulab::docker {

EngineProbe probe_engine(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
  EngineProbe p;
  p.endpoint = endpoint.to_string();
  HttpRequest r;
  r.method = "GET";
  r.target = "/_ping";
  r.connect_timeout = timeout;
  r.timeout = timeout;
  auto resp = make_curl_transport(endpoint)->send(r);
  if (!resp) {
    p.detail = resp.error().message;
    return p;
  }
  if (resp->status != 200) {
    p.detail = "engine answered HTTP " + std::to_string(resp->status) +
               (resp->body.empty() ? "" : ": " + trim(resp->body));
    return p;
  }
  p.reachable = true;
  if (std::string v = resp->header("Api-Version"); !v.empty()) p.detail = "API " + trim(v);
  return p;
}

EngineProbe probe_engine_from_env(std::chrono::milliseconds timeout) {
  const char* host = std::getenv("DOCKER_HOST");
  auto ep = Endpoint::from_env();
  if (!ep) {
    EngineProbe p;
    p.endpoint = host ? host : "";
    p.detail = ep.error().message;
    return p;
  }
  EngineProbe p = probe_engine(*ep, timeout);
  if (host && *host) p.endpoint = host;  // shown as the user wrote it
  return p;
}

}  // namespace gpulab::docker
