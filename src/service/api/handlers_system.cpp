// System endpoints: per-GPU monitoring, Prometheus metrics, the OpenAPI document, health, and
// admin-only user tokens and audit log.
#include "core/strings.h"
#include "service/api/handlers.h"
#include "service/base/api_error.h"
#include "service/domain/validation.h"
#include "service/engine/inventory.h"
#include "service/http/openapi.h"
#include "service/ops/containers/gpu_view.h"
#include "service/ops/policies/usage_meter.h"

namespace gpulab::service {

void require_admin(const Principal& who) {
  if (!who.admin) throw ApiError(ApiCode::kForbidden, "Admins only");
}

// Each host's name and state as the host monitor last saw it.
Json host_states(const Service& s) {
  Json a = Json::array();
  for (const auto& h : s.hosts) {
    Json j = {{"name", h->name()}, {"state", h->state()}};
    if (!h->up()) j["down_reason"] = h->down_reason();
    if (h->up() && !h->responsive()) j["unresponsive_reason"] = h->unresponsive_reason();
    // Whether a restart of its dockerd keeps its containers running (docs/engines.md).
    if (auto lr = h->live_restore()) j["live_restore"] = *lr;
    // gpulab ddp finds the host whose engine it runs on by this id (asked once per engine).
    if (h->up() && h->responsive())
      if (auto id = h->engine()->engine_id(); id) j["engine_id"] = *id;
    // Where its GPUs come from, and why it has none when it has none.
    const auto inventory = h->inventory();
    j["gpus"] = inventory->gpus.size();
    j["gpu_source"] = inventory->source;
    if (inventory->gpus.empty() && !inventory->note.empty()) j["gpu_note"] = inventory->note;
    if (h->probed()) {
      const auto probe = h->probe_state();
      j["gpu_probe"] = {
          {"state", probe.state}, {"image", h->probe().image}, {"root", h->probe().root}};
      if (!probe.error.empty()) j["gpu_probe"]["error"] = probe.error;
    }
    a.push_back(j);
  }
  return a;
}

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

ApiReply gpus(Service& s, Who who) {
  auto holders = s.store->gpu_holders();
  auto visible = visible_container_names(s, who);
  auto samples = s.sample_gpus();
  // Host pid -> container name for the "which container uses it" column.
  std::map<std::string, std::string> by_docker_id;
  for (const auto& c : s.store->containers()) by_docker_id[c.docker_id] = c.name;
  Json a = Json::array();
  const ServiceInventory inventory = s.inventory();
  std::set<std::string> offered;  // hosts whose GPUs are offered
  for (const auto& e : gpu_entries(s))
    if (e.offered) offered.insert(e.slot.host);
  for (const auto& g : inventory.gpus) {
    Json j = {{"index", g.index}, {"uuid", g.uuid},           {"vendor", g.vendor},
              {"name", g.name},   {"numa_node", g.numa_node}, {"links", g.links},
              {"host", g.host},   {"id", gpu_id(g)}};
    // Free and on a host that is up: what a create can get now (gpu_view.h).
    j["offered"] = offered.count(g.host) > 0;
    auto h = holders.find(g.uuid);
    // Another user's container is not named to a non-admin: only that the GPU is taken.
    j["allocated"] = h != holders.end();
    j["allocated_to"] =
        h == holders.end() || !visible.count(h->second) ? Json(nullptr) : Json(h->second);
    for (const auto& smp : samples) {
      if (smp.uuid != g.uuid) continue;
      if (smp.utilization_percent) j["utilization_percent"] = *smp.utilization_percent;
      if (smp.memory_used_bytes) j["memory_used_bytes"] = *smp.memory_used_bytes;
      if (smp.memory_total_bytes) j["memory_total_bytes"] = *smp.memory_total_bytes;
      if (smp.temperature_c) j["temperature_c"] = *smp.temperature_c;
      if (smp.power_mw) j["power_mw"] = *smp.power_mw;
      Json procs = Json::array();
      for (const auto& p : smp.processes) {
        auto c = by_docker_id.find(p.container_id);
        Json pj = {{"pid", p.pid}, {"name", p.name}};
        pj["container"] = c == by_docker_id.end() ? Json(nullptr) : Json(c->second);
        if (p.memory_used_bytes) pj["memory_used_bytes"] = *p.memory_used_bytes;
        // Users see only their own containers' processes.
        if (who.admin || (c != by_docker_id.end() && visible.count(c->second))) procs.push_back(pj);
      }
      j["processes"] = procs;
    }
    a.push_back(j);
  }
  return ApiReply::ok("GPU details retrieved successfully", {{"gpus", a},
                                                             {"source", inventory.source},
                                                             {"gpu_type", inventory.gpu_type},
                                                             {"hosts", host_states(s)}});
}

ApiReply metrics(Service& s, Who who) {
  std::string out = s.metrics.render();
  out += usage_metrics(*s.store, who.admin ? std::nullopt : std::optional(who.user));
  auto holders = s.store->gpu_holders();
  auto visible = visible_container_names(s, who);
  out += metric_header("gpulab_gpus", "gauge", "GPUs in the inventory");
  const ServiceInventory inventory = s.inventory();
  out += gauge_line("gpulab_gpus", {}, static_cast<double>(inventory.gpus.size()));
  out += metric_header("gpulab_gpu_allocated", "gauge", "1 when a container holds the GPU");
  for (const auto& g : inventory.gpus) {
    auto h = holders.find(g.uuid);
    out +=
        gauge_line("gpulab_gpu_allocated",
                   {{"uuid", g.uuid},
                    {"index", std::to_string(g.index)},
                    {"container", h == holders.end() || !visible.count(h->second) ? "" : h->second},
                    {"host", g.host}},
                   h == holders.end() ? 0 : 1);
  }
  // The same count as GET status's available_gpus (gpu_view.h): free on a host that is up.
  std::map<std::string, int> available;
  for (const auto& h : s.hosts) available[h->name()] = 0;
  for (const auto& e : gpu_entries(s))
    if (e.available()) ++available[e.slot.host];
  out += metric_header("gpulab_gpus_available", "gauge",
                       "GPUs a create can get now: free, on a host that is up");
  for (const auto& [host, n] : available)
    out += gauge_line("gpulab_gpus_available", {{"host", host}}, n);
  out += metric_header("gpulab_host_up", "gauge", "1 while the host's engine answers");
  for (const auto& h : s.hosts)
    out += gauge_line("gpulab_host_up", {{"host", h->name()}}, h->up() ? 1 : 0);
  std::map<std::string, int> by_state;
  for (const auto& c : s.store->containers()) ++by_state[c.state];
  out += metric_header("gpulab_containers", "gauge", "containers in the book, by state");
  for (const auto& [st, n] : by_state) out += gauge_line("gpulab_containers", {{"state", st}}, n);
  out += metric_header("gpulab_ports_held", "gauge", "host ports held or resting");
  out += gauge_line(
      "gpulab_ports_held", {},
      static_cast<double>(s.store->unavailable_ports(s.config.port_rest_seconds).size()));
  auto samples = s.sample_gpus();
  if (!samples.empty()) {
    out += metric_header("gpulab_gpu_utilization_percent", "gauge", "GPU utilization");
    for (const auto& smp : samples)
      if (smp.utilization_percent)
        out += gauge_line("gpulab_gpu_utilization_percent", {{"uuid", smp.uuid}},
                          *smp.utilization_percent);
    out += metric_header("gpulab_gpu_memory_used_bytes", "gauge", "GPU memory in use");
    for (const auto& smp : samples)
      if (smp.memory_used_bytes)
        out += gauge_line("gpulab_gpu_memory_used_bytes", {{"uuid", smp.uuid}},
                          static_cast<double>(*smp.memory_used_bytes));
    out += metric_header("gpulab_gpu_temperature_celsius", "gauge", "GPU temperature");
    for (const auto& smp : samples)
      if (smp.temperature_c)
        out +=
            gauge_line("gpulab_gpu_temperature_celsius", {{"uuid", smp.uuid}}, *smp.temperature_c);
    out += metric_header("gpulab_gpu_power_watts", "gauge", "GPU power draw");
    for (const auto& smp : samples)
      if (smp.power_mw)
        out += gauge_line("gpulab_gpu_power_watts", {{"uuid", smp.uuid}}, *smp.power_mw / 1000.0);
  }
  ApiReply r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = std::move(out);
  return r;
}

ApiReply add_user(Service& s, Req req, Who who) {
  require_admin(who);
  Json j = parse_request(req.body, user_schema());
  std::string token = s.auth->issue_token(j["name"].get<std::string>(), j.value("admin", false));
  s.store->audit(who.user, "issue-token", j["name"].get<std::string>(), "ok");
  return ApiReply::ok("Token created (shown once)", {{"name", j["name"]}, {"token", token}});
}

ApiReply revoke(Service& s, Req req, Who who) {
  require_admin(who);
  Json j = parse_request(req.body, revoke_schema());
  if (j.contains("token") == j.contains("name"))
    throw ApiError(ApiCode::kInvalidRequest, "Give either 'token' or 'name'");
  if (j.contains("token")) {
    s.auth->revoke_token(j["token"].get<std::string>());
    s.store->audit(who.user, "revoke-token", "(token)", "ok");
    return ApiReply::ok("Token revoked", {{"revoked", 1}});
  }
  std::string name = j["name"].get<std::string>();
  int n = s.auth->revoke_user(name);
  s.store->audit(who.user, "revoke-tokens", name, "ok", std::to_string(n));
  return ApiReply::ok("Tokens revoked", {{"name", name}, {"revoked", n}});
}

ApiReply readiness(Service& s) {
  if (s.hosts.size() <= 1) {
    const Engine& e = s.engine();  // ENGINE_UNAVAILABLE: not connected
    auto ping = e.ping();
    if (!ping)
      throw ApiError(ApiCode::kEngineUnavailable,
                     "Not ready: Docker engine unreachable: " + ping.error().message,
                     ping.error().hint.empty() ? e.unavailable_hint() : ping.error().hint);
    return ApiReply::ok("ready", {{"engine", true}, {"hosts", host_states(s)}});
  }
  std::vector<std::string> down;
  for (const auto& h : s.hosts)
    if (!h->up()) down.push_back(h->name());
  if (down.size() == s.hosts.size())
    throw ApiError(ApiCode::kEngineUnavailable, "Not ready: no host is up",
                   "start the hosts' Docker engines; GET /healthz lists why each is down");
  return ApiReply::ok(down.empty() ? "ready" : "ready (down: " + join(down, ", ") + ")",
                      {{"engine", true}, {"hosts", host_states(s)}});
}

}  // namespace

void add_system_routes(Router& r, Service& s) {
  Service* sp = &s;
  const Router* rp = &r;
  const std::string b = kApiBase;
  r.add({.method = "GET",
         .path = b + "/gpus",
         .handler = [sp](Req, Who w) { return gpus(*sp, w); },
         .summary = "Per GPU: allocation, utilization, memory, temperature, power, processes",
         .tag = "monitoring"});
  r.add({.method = "GET",
         .path = "/metrics",
         .handler = [sp](Req, Who w) { return metrics(*sp, w); },
         .summary = "Prometheus metrics",
         .tag = "monitoring"});
  r.add({.method = "GET",
         .path = "/api/v1/openapi.json",
         .handler =
             [rp](Req, Who) {
               ApiReply a;
               a.body = openapi_document(*rp).dump(2);
               return a;
             },
         .summary = "This document",
         .tag = "system",
         .authenticated = false});
  r.add({.method = "GET",
         .path = "/healthz",
         .handler =
             [sp](Req, Who) {
               const Engine* first = sp->hosts.empty() ? nullptr : sp->hosts.front()->engine();
               bool engine = first && first->ping().ok();
               Json d = {{"engine", engine}, {"gpus", sp->inventory().gpus.size()}};
               // Which engine this service books for: gpulab ddp checks it uses the same one.
               if (engine)
                 if (auto id = first->engine_id(); id) d["engine_id"] = *id;
               d["hosts"] = host_states(*sp);
               return ApiReply::ok(engine ? "ok" : "engine unreachable", d);
             },
         .summary = "Liveness: 200 while the service answers (engine reachability as a field)",
         .tag = "system",
         .authenticated = false});
  // Readiness for load balancers and probes: not ready while the engine cannot be reached.
  r.add({.method = "GET",
         .path = "/readyz",
         .handler = [sp](Req, Who) { return readiness(*sp); },
         .summary = "Readiness: 200 when the Docker engine answers (several hosts: when one is "
                    "up; each host's state in hosts), else 503 ENGINE_UNAVAILABLE",
         .tag = "system",
         .authenticated = false});
  r.add({.method = "POST",
         .path = b + "/users",
         .handler = [sp](Req q, Who w) { return add_user(*sp, q, w); },
         .summary = "Create a user (or a new token for one); admins only",
         .tag = "system",
         .schema = &user_schema()});
  r.add({.method = "POST",
         .path = b + "/users/revoke",
         .handler = [sp](Req q, Who w) { return revoke(*sp, q, w); },
         .summary = "Revoke a token, or all tokens of a user; admins only",
         .tag = "system",
         .schema = &revoke_schema()});
  r.add({.method = "GET",
         .path = b + "/audit",
         .handler =
             [sp](Req q, Who w) {
               require_admin(w);
               int n = 100;
               if (q.query.count("limit"))
                 n = std::max(1, std::min(10000, std::atoi(q.query.at("limit").c_str())));
               return ApiReply::ok("Audit log retrieved successfully",
                                   {{"entries", sp->store->audit_tail(n)}});
             },
         .summary = "Recent audit log entries; admins only",
         .tag = "system",
         .query_params = {"limit"}});
}

}  // namespace gpulab::service
