// Service wiring and engine error translation.
#include "service/ops/service.h"

#include "core/log.h"
#include "service/base/api_error.h"

namespace gpulab::service {

namespace {
// The API's words when no engine answers and the engine gave no hint of its own (users know them).
constexpr const char* kEngineHint =
    "start dockerd (sudo systemctl start docker) or point DOCKER_HOST at a running engine";
}  // namespace

const Engine& Service::engine() const {
  if (!engine_ptr)
    throw ApiError(ApiCode::kEngineUnavailable, "Docker engine is not connected", kEngineHint);
  return *engine_ptr;
}

std::vector<GpuSample> Service::sample_gpus() const {
  return engine_ptr ? engine_ptr->sample_gpus() : std::vector<GpuSample>{};
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
  s->policy = policy_from_string(s->config.allocation_policy);
  auto engine = open_engine(s->config);
  if (!engine) throw Exception(engine.error());
  s->engine_ptr = std::move(*engine);
  s->inventory = s->engine_ptr->gpus();
  return s;
}

void throw_engine_error(const Error& e) {
  const std::string& m = e.message;
  if (m.find("port is already allocated") != std::string::npos ||
      m.find("address already in use") != std::string::npos)
    throw ApiError(ApiCode::kPortConflict, m);
  switch (e.code) {
    case Code::kUnavailable:
      throw ApiError(ApiCode::kEngineUnavailable, m, e.hint.empty() ? kEngineHint : e.hint);
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
