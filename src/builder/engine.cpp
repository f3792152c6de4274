// The builder commands' engine connection; see engine.h.
#include "builder/engine.h"

#include "core/error.h"

namespace gpulab::builder {

docker::LabEngine connect_engine(const std::string& docker_host) {
  auto ep =
      docker_host.empty() ? docker::Endpoint::from_env() : docker::Endpoint::parse(docker_host);
  if (!ep.ok()) throw Exception(ep.error());
  auto engine = docker::LabEngine::connect(*ep);
  if (!engine.ok()) {
    throw Exception(
        Code::kUnavailable,
        "Docker service is not running. Please start Docker service (" + ep->to_string() + ")",
        docker::kStartEngineHint);
  }
  return std::move(engine).value();
}

}  // namespace gpulab::builder
