// Start-up sequence of the service and the two offline helpers (tokens, OpenAPI).
#include "service/app/server.h"

#include <cstdio>

#include "core/files.h"
#include "core/log.h"
#include "service/api/handlers.h"
#include "service/http/http_server.h"
#include "service/http/openapi.h"
#include "service/http/refusal_audit.h"
#include "service/ops/hosts/event_watcher.h"
#include "service/ops/hosts/host_monitor.h"
#include "service/ops/hosts/reconciler.h"
#include "service/ops/housekeeper.h"
#include "service/ops/policies/idle_reclaim.h"
#include "service/ops/policies/quota.h"
#include "service/store/user_policy.h"
#include "service/web/dashboard.h"

namespace gpulab::service {

void add_routes(Router& router, Service& s) {
  add_container_routes(router, s);
  add_image_routes(router, s);
  add_system_routes(router, s);
  add_lease_routes(router, s);
  add_policy_routes(router, s);
  add_host_routes(router, s);
}

namespace {

// "unix:///var/run/docker.sock (API 1.41)", or with several hosts "a: tcp://... (API ...), b:
// down".
std::string engines_text(const Service& s) {
  if (s.hosts.size() == 1) return s.engine().describe();
  std::string out;
  for (const auto& h : s.hosts) {
    if (!out.empty()) out += ", ";
    out += h->name() + ": " + (h->engine() && h->up() ? h->engine()->describe() : "down");
  }
  return out;
}

}  // namespace

void serve(const ServiceConfig& config, const ServeOptions& options) {
  auto s = open_service(config);
  ReconcileReport rep = reconcile(*s, true);
  spdlog::info("reconciled with the engine: {}", rep.to_json().dump());
  Router router(*s->auth, &s->metrics);
  add_routes(router, *s);
  Dashboard dashboard(*s);
  add_dashboard_routes(router, dashboard);
  router.set_sessions(&dashboard.sessions);
  AuthThrottle throttle(s->config.auth_failures_before_throttle);
  router.set_throttle(&throttle);
  RefusalAudit refusals(*s->store);
  router.set_refusal_sink([&refusals](const ApiRequest& q, const std::string& user,
                                      const std::string& route,
                                      const ErrorReply& e) { refusals.record(q, user, route, e); });
  HttpServer server(s->config, router);
  auto st = server.listen();
  if (!st) throw Exception(st.error());
  bool tls = !s->config.tls_cert.empty();
  if (!tls && !is_loopback_host(s->config.listen_host))
    spdlog::warn(
        "serving plain HTTP on {} (--insecure_http): tokens and passwords cross the "
        "network unencrypted; serve HTTPS with --tls_cert and --tls_key",
        s->config.listen_host);
  const ServiceInventory inventory = s->inventory();
  std::printf("gpulab serve: listening on %s://%s:%u (engine %s, %zu GPU(s) %s, auth %s)\n",
              tls ? "https" : "http", s->config.listen_host.c_str(), server.port(),
              engines_text(*s).c_str(), inventory.gpus.size(), inventory.source.c_str(),
              s->auth->mode().c_str());
  std::fflush(stdout);
  // Written after the start-up line: whoever waits for this file (scripts, tests) finds the line.
  if (!options.port_file.empty()) {
    auto w = write_file_atomic(options.port_file, std::to_string(server.port()) + "\n");
    if (!w) throw Exception(w.error());
  }
  EventWatcher watcher(*s);
  watcher.start();
  HostMonitor hosts(*s);
  hosts.start();
  Housekeeper housekeeper(*s);
  housekeeper.start();
  dashboard.start();
  server.run(true);
  dashboard.stop();
  housekeeper.stop();
  hosts.stop();
  watcher.stop();
}

std::string issue_token(const ServiceConfig& config, const std::string& user, bool admin) {
  auto store = Store::open(config.db_path);
  if (!store) throw Exception(store.error());
  Auth auth(**store, true);
  return auth.issue_token(user, admin);
}

int revoke_tokens(const ServiceConfig& config, const std::string& token, const std::string& user) {
  auto store = Store::open(config.db_path);
  if (!store) throw Exception(store.error());
  Auth auth(**store, true);
  if (!token.empty()) {
    auth.revoke_token(token);
    return 1;
  }
  return auth.revoke_user(user);
}

std::string set_policy_offline(const ServiceConfig& config, bool quota, const std::string& text) {
  auto store = Store::open(config.db_path);
  if (!store) throw Exception(store.error());
  auto [user, fields] = policy_from_text(text);
  fields["user"] = user;
  Json j = parse_request(fields.dump(), quota ? quota_schema() : idle_policy_schema());
  Json stored = quota ? set_quota(**store, j) : set_idle_policy(**store, j);
  (*store)->audit("cli", quota ? "set-quota" : "set-idle-policy", user, "ok", stored.dump());
  return Json{{"user", user}, {quota ? "quota" : "idle_policy", stored}}.dump();
}

std::string show_policies_offline(const ServiceConfig& config) {
  auto store = Store::open(config.db_path);
  if (!store) throw Exception(store.error());
  Json out = {{"quotas", Json::object()}, {"idle_policies", Json::object()}};
  for (const auto& u : policy_users(**store, PolicyKind::kQuota))
    out["quotas"][u] = load_policy(**store, PolicyKind::kQuota, u);
  for (const auto& u : policy_users(**store, PolicyKind::kIdle))
    out["idle_policies"][u] = load_policy(**store, PolicyKind::kIdle, u);
  return out.dump(2);
}

std::string openapi_json() {
  // Routes only need a Service to bind handlers to; none of them runs here.
  Service s;
  auto store = Store::open(":memory:");
  if (!store) throw Exception(store.error());
  s.store = std::move(*store);
  s.auth = std::make_unique<Auth>(*s.store, false);
  Router router(*s.auth, nullptr);
  add_routes(router, s);
  Dashboard dashboard(s);
  add_dashboard_routes(router, dashboard);
  return openapi_document(router).dump(2) + "\n";
}

}  // namespace gpulab::service
