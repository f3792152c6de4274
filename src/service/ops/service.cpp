// Service wiring and engine error translation.
#include "service/ops/service.h"

#include <map>
#include <thread>

#include "core/log.h"
#include "service/base/api_error.h"

namespace gpulab::service {

namespace {
// The API's words when no engine answers and the engine gave no hint of its own (users know them).
constexpr const char* kEngineHint =
    "start dockerd (sudo systemctl start docker) or point DOCKER_HOST at a running engine";
}  // namespace

const Engine& Service::engine() const {
  if (hosts.empty())
    throw ApiError(ApiCode::kEngineUnavailable, "Docker engine is not connected", kEngineHint);
  return engine_on(hosts.front()->name());
}

Host* Service::find_host(const std::string& name) const {
  for (const auto& h : hosts)
    if (h->name() == name) return h.get();
  return nullptr;
}

const Engine& Service::engine_on(const std::string& name) const {
  const Host* h = name.empty() && !hosts.empty() ? hosts.front().get() : find_host(name);
  if (!h) throw ApiError(ApiCode::kInvalidRequest, "unknown host '" + name + "'");
  const Engine* e = h->engine();
  if (e && usable(*h)) return *e;  // one host: its own errors, as before
  if (!e && hosts.size() == 1)
    throw ApiError(ApiCode::kEngineUnavailable, "Docker engine is not connected", kEngineHint);
  if (h->up())
    throw ApiError(ApiCode::kEngineUnavailable,
                   "host '" + h->name() + "' is not answering: " + h->unresponsive_reason(),
                   "its containers keep their GPUs; it is asked again within host_check_seconds "
                   "(GET /healthz shows its state): try again then, or create on another host");
  throw ApiError(ApiCode::kEngineUnavailable,
                 "host '" + h->name() + "' is down: " + h->down_reason(),
                 "its containers keep their GPUs and come back when its engine answers; create "
                 "on another host (leave out \"host\") or wait");
}

const Engine& Service::engine_of(const ContainerRecord& c) const {
  if (!c.host.empty() && !find_host(c.host))
    throw ApiError(ApiCode::kEngineUnavailable,
                   "container '" + c.name + "' is on host '" + c.host +
                       "', which is not in this service's hosts",
                   "put '" + c.host +
                       "' back in the config's hosts: its containers come back as they were "
                       "(they keep their GPUs and ports booked meanwhile); if it is retired for "
                       "good, an admin forgets its rows (POST /api/v1/gpu-docker/hosts/forget)");
  return engine_on(c.host);
}

ServiceInventory Service::inventory() const {
  ServiceInventory all;
  for (const auto& h : hosts) {
    const auto inv = h->inventory();
    all.gpus.insert(all.gpus.end(), inv->gpus.begin(), inv->gpus.end());
    if (all.source.empty() || all.source == "none") {
      all.source = inv->source;
      all.note = inv->note;
    }
  }
  if (all.source.empty()) all.source = "none";
  all.gpu_type = gpu_type_of(all.gpus);
  return all;
}

std::vector<GpuSample> Service::sample_gpus() const {
  std::vector<GpuSample> out;
  for (const auto& h : hosts) {
    const Engine* e = h->engine();
    if (!e || !h->local()) continue;
    auto part = e->sample_gpus();
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

void Service::warn_gpus_also_on_other_hosts(const Host& h) const {
  const auto mine = h.inventory();
  for (const auto& other : hosts) {
    if (other.get() == &h) continue;
    const auto theirs = other->inventory();
    for (const auto& g : mine->gpus)
      if (theirs->find(g.uuid))
        spdlog::warn(
            "host {}: GPU {} is also host {}'s (two host entries for one server?): one "
            "container at a time gets it, through either; remove one entry from hosts",
            h.name(), g.uuid, other->name());
  }
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

namespace {

// The GPU probes of the hosts that answered, all at once (each is bounded by
// probe_timeout_seconds); a host that fails its probe starts with no GPUs and says why in
// /healthz, and one that was down is probed by the host monitor when it answers.
void probe_hosts(Service& s) {
  std::vector<std::thread> probes;
  for (const auto& h : s.hosts)
    if (h->probed() && h->engine()) probes.emplace_back([hp = h.get()] { hp->probe_if_due(); });
  for (auto& t : probes) t.join();
  for (const auto& h : s.hosts)
    if (h->probed()) s.warn_gpus_also_on_other_hosts(*h);
}

// Rows of hosts the config no longer lists: said once at start, as the requests on them will.
void warn_unconfigured_hosts(Service& s) {
  std::map<std::string, int> rows;
  for (const auto& c : s.store->containers())
    if (!s.find_host(c.host)) ++rows[c.host];
  for (const auto& [host, n] : rows)
    spdlog::warn(
        "the book has {} container(s) on host '{}', which is not in hosts: they show as "
        "unreachable and keep their GPUs and ports booked until that host is back in the config "
        "(or an admin forgets them: POST /api/v1/gpu-docker/hosts/forget {{\"name\": \"{}\"}})",
        n, host, host);
}

// Two hosts of the config that are one engine (two URLs of one dockerd, engine IDs compared
// among the hosts that answer at start): refused, as the book would hold one machine's GPUs and
// containers twice. A host that was down at start is compared when it first answers, and kept
// down if another host owns its engine.
void refuse_one_engine_twice(Service& s) {
  for (const auto& h : s.hosts) {
    const Engine* e = h->engine();
    if (!e || !h->up()) continue;
    if (auto st = s.engine_ids.admit(h->name(), *e); !st) throw Exception(st.error());
  }
  for (auto& h : s.hosts)
    h->set_admission([&ids = s.engine_ids](const Host& host, const Engine& e) {
      return ids.admit(host.name(), e, /*log=*/true);
    });
}

// Connects every host; one that does not answer is reported and joins when it does (the host
// monitor retries). Without a hosts list the one engine must answer, as before hosts existed.
void open_hosts(Service& s, const EngineOpener& open) {
  for (auto& hc : lab_hosts(s.config)) {
    if (hc.insecure)
      spdlog::warn(
          "host {}: plain TCP to {} (insecure: true): anyone on that network can drive "
          "its engine",
          hc.name, hc.url);
    auto h = std::make_unique<Host>(hc, s.config, open);
    if (auto st = h->connect(); !st) {
      if (s.config.hosts.empty()) throw Exception(st.error());
      spdlog::error("host {} is down at start: {}", hc.name, st.error().to_string());
    }
    s.hosts.push_back(std::move(h));
  }
  if (s.hosts.size() > 1) refuse_one_engine_twice(s);
  s.store->adopt_default_host(s.hosts.front()->name());
  warn_unconfigured_hosts(s);
  probe_hosts(s);
}

}  // namespace

std::unique_ptr<Service> open_service(const ServiceConfig& config, EngineOpener open) {
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
  open_hosts(*s, open);
  return s;
}

const EngineArchives& require_archives(const Engine& e, const std::string& what) {
  auto archives = archives_of(e, what);
  if (!archives) throw_engine_error(archives.error());
  return **archives;
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
      throw ApiError(ApiCode::kNotFound, m, e.hint);
    case Code::kAlreadyExists:
      throw ApiError(ApiCode::kNameConflict, m, e.hint);
    case Code::kConflict:
      throw ApiError(ApiCode::kStateConflict, m, e.hint);
    case Code::kTimeout:
      throw ApiError(ApiCode::kTimeout, m, e.hint);
    case Code::kInvalidArgument:
      throw ApiError(ApiCode::kInvalidRequest, m, e.hint);
    case Code::kUnsupported:
      throw ApiError(ApiCode::kUnsupported, m, e.hint);
    default:
      throw ApiError(ApiCode::kInternalError, "engine: " + m, e.hint);
  }
}

}  // namespace gpulab::service
