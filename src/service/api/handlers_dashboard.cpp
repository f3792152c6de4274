// The dashboard's routes: the page and its assets (open: they hold no data), sign-in and
// sign-out (a session cookie made from an API token), the GPU history, the event stream, and the
// admin's user list. Every data request of the page goes through the same API and its ownership
// checks as curl does.
#include "core/strings.h"
#include "service/api/handlers.h"
#include "service/base/api_error.h"
#include "service/base/crypto.h"
#include "service/domain/validation.h"
#include "service/static_assets.h"
#include "service/web/dashboard.h"

namespace gpulab::service {

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

const RequestSchema& session_schema() {
  static const RequestSchema s{"SessionRequest",
                               {{"token", FieldType::kString, true, "an API token of the user"}}};
  return s;
}

// The page may run only its own scripts and talk only to this service.
void add_page_headers(ApiReply& r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self' "
                         "'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
                         "frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("Cache-Control", "no-cache");
}

ApiReply asset(const std::string& path) {
  const WebAsset* a = find_web_asset(path);
  if (!a) throw ApiError(ApiCode::kNotFound, "No such dashboard file: " + path);
  ApiReply r;
  r.content_type = web_content_type(path);
  r.body.assign(reinterpret_cast<const char*>(a->data), a->size);
  add_page_headers(r);
  return r;
}

bool from_session(Req q) {
  return q.authorization.empty() && !WebSessions::cookie_value(q.cookie, kSessionCookie).empty();
}

// What the page knows of its user: name, role, the CSRF token of a session, and the SSH user its
// containers' SSH command names (the service's ssh_user, not always root).
// insecure_http: plain HTTP beyond loopback was allowed; the page warns of it.
Json session_json(Dashboard& d, Who w) {
  const ServiceConfig& c = d.service.config;
  return {{"user", w.user},
          {"admin", w.admin},
          {"ssh_user", c.ssh_user},
          {"insecure_http", c.tls_cert.empty() && !is_loopback_host(c.listen_host)}};
}

bool https(const Dashboard& d) {
  return !d.service.config.tls_cert.empty();
}

ApiReply sign_in(const Router& router, Dashboard& d, Req q) {
  Json j = parse_request(q.body, session_schema());
  std::string token = j["token"].get<std::string>();
  if (token.empty())  // never "no token", which may act as the local user when auth is off
    throw ApiError(ApiCode::kUnauthorized, "Missing API token", "paste your API token");
  Principal who = router.check_token("Bearer " + token, q.remote);
  auto s = d.sessions.create(who, sha256_hex(token));
  d.service.store->audit(who.user, "sign-in", "dashboard", "ok", q.remote);
  Json data = session_json(d, who);
  data["csrf_token"] = s.csrf;
  ApiReply r = ApiReply::ok("Signed in", data);
  r.headers.emplace_back("Set-Cookie", WebSessions::set_cookie(s.id, https(d)));
  return r;
}

ApiReply whoami(Dashboard& d, Req q, Who w) {
  Json data = session_json(d, w);
  data["auth_required"] = d.service.auth->required();
  data["via"] = from_session(q) ? "session" : (q.authorization.empty() ? "open" : "token");
  if (from_session(q)) data["csrf_token"] = d.sessions.csrf_for(q.cookie);
  return ApiReply::ok("Signed in", data);
}

ApiReply sign_out(Dashboard& d, Req q, Who w) {
  bool ended = d.sessions.end(q.cookie);
  d.service.store->audit(w.user, "sign-out", "dashboard", ended ? "ok" : "no session");
  ApiReply r = ApiReply::ok("Signed out", {{"ended", ended}});
  r.headers.emplace_back("Set-Cookie", WebSessions::clear_cookie(https(d)));
  return r;
}

ApiReply gpu_history(Dashboard& d, Req q) {
  std::int64_t since = 0;
  if (auto it = q.query.find("since"); it != q.query.end()) {
    const auto seconds = parse_double(it->second);
    if (!seconds || !(*seconds >= 0) || *seconds > 1e11)
      throw ApiError(ApiCode::kInvalidRequest, "'since' must be seconds since the epoch");
    since = static_cast<std::int64_t>(*seconds * 1000.0);
  }
  Json gpus = Json::array();
  const ServiceInventory inventory = d.service.inventory();
  for (const auto& g : inventory.gpus) {
    Json j = d.history.columns(g.uuid, since);
    j["uuid"] = g.uuid;
    j["index"] = g.index;
    j["name"] = g.name;
    j["vendor"] = g.vendor;
    j["host"] = g.host;
    gpus.push_back(j);
  }
  Json hosts = Json::array();  // each host's state, for the dashboard's host view
  for (const auto& h : d.service.hosts)
    hosts.push_back({{"name", h->name()}, {"state", h->state()}});
  return ApiReply::ok("GPU history retrieved successfully",
                      {{"sample_seconds", d.service.config.dashboard.sample_seconds},
                       {"capacity", d.history.capacity()},
                       {"gpus", gpus},
                       {"hosts", hosts}});
}

ApiReply events(Dashboard& d, Req q) {
  ApiReply r;
  r.events = &d.hub;
  // The stream ends with its session or token (sign-out, revocation).
  if (from_session(q)) {
    r.stream_allowed = [dp = &d, cookie = q.cookie] { return dp->sessions.alive(cookie); };
  } else if (!q.authorization.empty()) {
    std::string hash = sha256_hex(q.authorization.substr(std::string("Bearer ").size()));
    r.stream_allowed = [sp = &d.service, hash] {
      return sp->store->user_for_token(hash).has_value();
    };
  }
  return r;
}

ApiReply users(Dashboard& d, Who w) {
  require_admin(w);
  Json a = Json::array();
  for (const auto& u : d.service.store->users())
    a.push_back({{"name", u.name}, {"admin", u.admin}});
  return ApiReply::ok("Users retrieved successfully", {{"users", a}});
}

}  // namespace

void add_dashboard_routes(Router& r, Dashboard& d) {
  Dashboard* dp = &d;
  const std::string b = kApiBase;
  // The page and its files are open: they hold no data.
  r.add({.method = "GET",
         .path = "/",
         .handler = [](Req, Who) { return asset("index.html"); },
         .summary = "The web dashboard",
         .tag = "dashboard",
         .authenticated = false});
  r.add({.method = "GET",
         .path = "/ui/{file}",
         .handler = [](Req q, Who) { return asset(q.query.at("file")); },
         .summary = "Dashboard files",
         .tag = "dashboard",
         .authenticated = false});
  r.add({.method = "GET",
         .path = "/ui/vendor/{file}",
         .handler = [](Req q, Who) { return asset("vendor/" + q.query.at("file")); },
         .summary = "Dashboard libraries (pinned, bundled)",
         .tag = "dashboard",
         .authenticated = false});
  r.add({.method = "POST",
         .path = b + "/session",
         .handler = [dp, rp = &r](Req q, Who) { return sign_in(*rp, *dp, q); },
         .summary = "Dashboard sign-in: a session cookie from an API token; answers the CSRF token",
         .tag = "dashboard",
         .schema = &session_schema(),
         .authenticated = false});
  r.add({.method = "GET",
         .path = b + "/session",
         .handler = [dp](Req q, Who w) { return whoami(*dp, q, w); },
         .summary = "Who is signed in (and the session's CSRF token)",
         .tag = "dashboard"});
  r.add({.method = "DELETE",
         .path = b + "/session",
         .handler = [dp](Req q, Who w) { return sign_out(*dp, q, w); },
         .summary = "Dashboard sign-out: ends the session",
         .tag = "dashboard"});
  r.add({.method = "GET",
         .path = b + "/gpus/history",
         .handler = [dp](Req q, Who) { return gpu_history(*dp, q); },
         .summary = "Per GPU: samples of the last hour (ring buffer), as columns",
         .tag = "monitoring",
         .query_params = {"since"}});
  r.add({.method = "GET",
         .path = b + "/events",
         .handler = [dp](Req q, Who) { return events(*dp, q); },
         .summary = "Server-Sent Events: gpus (samples), containers and images (changed)",
         .tag = "dashboard"});
  r.add({.method = "GET",
         .path = b + "/users",
         .handler = [dp](Req, Who w) { return users(*dp, w); },
         .summary = "List users; admins only",
         .tag = "system"});
}

}  // namespace gpulab::service
