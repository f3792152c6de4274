// Service wiring and engine error translation.
#include "service/service.h"

#include "core/log.h"
#include "service/api_error.h"

namespace gpulab::service {

const docker::Client& Service::docker() const {
  if (!engine)
    throw ApiError(ApiCode::kEngineUnavailable, "Docker engine is not connected",
                   docker::kStartEngineHint);
  return *engine;
}

std::unique_lock<std::mutex> Service::lock_container(const std::string& name) {
  std::shared_ptr<std::mutex> m;
  {
    std::lock_guard<std::mutex> g(names_mu_);
    auto& slot = name_locks_[name];
    if (!slot) slot = std::make_shared<std::mutex>();
    m = slot;
  }
  return std::unique_lock<std::mutex>(*m);
}

std::unique_ptr<Service> open_service(const ServiceConfig& config) {
  auto s = std::make_unique<Service>();
  s->config = config;
  if (!is_loopback_host(config.listen_host)) s->config.auth_required = true;
  auto st = validate_config(s->config);
  if (!st) throw Exception(st.error());
  auto store = Store::open(config.db_path);
  if (!store) throw Exception(store.error());
  s->store = std::move(*store);
  s->auth = std::make_unique<Auth>(*s->store, s->config.auth_required);
  s->auth->seed_users(s->config.users);
  s->inventory = build_inventory(s->config);
  s->policy = policy_from_string(s->config.allocation_policy);
  Result<docker::Endpoint> ep = config.docker_host.empty()
                                    ? docker::Endpoint::from_env()
                                    : docker::Endpoint::parse(config.docker_host);
  if (!ep) throw Exception(ep.error());
  auto client = docker::Client::connect(*ep);
  if (!client) {
    throw Exception(
        Code::kUnavailable,
        "cannot reach the Docker engine at " + ep->to_string() + ": " + client.error().message,
        docker::kStartEngineHint);
  }
  s->engine.emplace(std::move(*client));
  return s;
}

void throw_engine_error(const Error& e) {
  const std::string& m = e.message;
  if (m.find("port is already allocated") != std::string::npos ||
      m.find("address already in use") != std::string::npos)
    throw ApiError(ApiCode::kPortConflict, m);
  switch (e.code) {
    case Code::kUnavailable:
      throw ApiError(ApiCode::kEngineUnavailable, m,
                     e.hint.empty() ? docker::kStartEngineHint : e.hint);
    case Code::kNotFound:
      throw ApiError(ApiCode::kNotFound, m);
    case Code::kAlreadyExists:
      throw ApiError(ApiCode::kNameConflict, m);
    case Code::kConflict:
      throw ApiError(ApiCode::kStateConflict, m);
    case Code::kTimeout:
      throw ApiError(ApiCode::kTimeout, m);
    case Code::kInvalidArgument:
      throw ApiError(ApiCode::kInvalidRequest, m);
    default:
      throw ApiError(ApiCode::kInternalError, "engine: " + m);
  }
}

}  // namespace gpulab::service
