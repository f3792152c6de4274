// Forgetting a retired host's rows (forget_host.h): the refusals, what the rows hold, and the one
// transaction that lets go of them.
#include "service/ops/hosts/forget_host.h"

#include <map>
#include <set>

#include "core/log.h"
#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/ops/leases/lease_ops.h"
#include "service/ops/policies/usage_meter.h"

namespace gpulab::service {

namespace {

// The three refusals, in the order a wrong request would meet them. Runs inside the transaction.
void check_forgettable(Service& s, const std::string& host) {
  if (!valid_host_name(host))
    throw ApiError(ApiCode::kInvalidRequest,
                   "'" + host + "' is not a host name (1-32 of a-z, 0-9 and '-')",
                   "give the host as list shows it in a container's \"host\"");
  if (s.find_host(host))
    throw ApiError(ApiCode::kStateConflict,
                   "host '" + host +
                       "' is in this service's hosts; only a host the config no longer lists can "
                       "be forgotten",
                   "delete its containers (POST delete) or move them to another host (POST "
                   "move); to retire it, take it out of the config's hosts, restart the service, "
                   "then forget it");
  if (s.store->hosts_in_book().count(host)) return;
  std::vector<std::string> others;
  for (const auto& h : retired_hosts(s)) others.push_back("'" + h + "'");
  throw ApiError(ApiCode::kNotFound, "the book holds nothing on host '" + host + "'",
                 others.empty()
                     ? "no host outside the config has rows in the book"
                     : "hosts outside the config with rows in the book: " + join(others, ", "));
}

// What forgetting would let go of, read inside the transaction.
ForgetReport survey(Service& s, const std::string& host) {
  ForgetReport r;
  r.host = host;
  for (auto& c : s.store->containers())
    if (c.host == host) r.containers.push_back(std::move(c));
  r.gpus = s.store->host_gpu_rows(host);
  r.ports = s.store->host_port_rows(host);
  for (const auto& m : s.store->moves()) {
    if (m.source_host != host && m.target_host != host) continue;
    r.moves.push_back(m);
    auto row = s.store->find_container(m.container_id);
    if (row && row->host != host && m.target_host == host) {
      // The target's GPUs (pending rows): this host's.
      auto pending = s.store->container_gpus(m.container_id, true);
      r.gpus.insert(r.gpus.end(), pending.begin(), pending.end());
    }
  }
  return r;
}

// A move journal row that names the host: a container elsewhere gets its state back and loses
// its pending booking there; the row goes (what the move left on the other host is that host's
// start-up sweep's: a labelled container without a row, an image nothing owns).
void drop_move(Service& s, const std::string& host, const MoveRecord& m) {
  auto row = s.store->find_container(m.container_id);
  if (row && row->host != host && m.target_host == host) {
    s.store->drop_pending(row->id);
    if (row->state == state::kMoving) s.store->set_state(row->id, m.prev_state);
  }
  s.store->remove_move(m.tag);
}

void audit_forget(Service& s, const ForgetReport& r, const std::string& who) {
  std::map<std::string, std::vector<std::string>> by_user;
  for (const auto& c : r.containers) {
    by_user[c.owner].push_back(c.name);
    std::string detail = "host=" + r.host + " owner=" + c.owner + " state=" + c.state +
                         " gpus=" + std::to_string(c.gpus.size()) + (is_lease(c) ? " (lease)" : "");
    s.store->audit(who, "forget", c.name, "ok", detail);
  }
  std::vector<std::string> parts;
  for (const auto& [user, names] : by_user) parts.push_back(user + ": " + join(names, " "));
  s.store->audit(who, "forget-host", r.host, "ok",
                 std::to_string(r.containers.size()) + " row(s) (" + join(parts, "; ") + "), " +
                     std::to_string(r.gpus.size()) + " GPU(s), " + std::to_string(r.ports.size()) +
                     " port(s), " + std::to_string(r.moves.size()) +
                     " move(s); no engine contacted");
}

}  // namespace

std::vector<std::string> retired_hosts(Service& s) {
  std::vector<std::string> v;
  for (const auto& h : s.store->hosts_in_book())
    if (!h.empty() && !s.find_host(h)) v.push_back(h);
  return v;
}

std::vector<ForgetReport> survey_retired_hosts(Service& s) {
  return s.store->transaction([&] {
    std::vector<ForgetReport> v;
    for (const auto& h : retired_hosts(s)) {
      v.push_back(survey(s, h));
      v.back().dry_run = true;
    }
    return v;
  });
}

ForgetReport forget_host(Service& s, const std::string& host, bool dry_run,
                         const std::string& who) {
  // The rows' name locks first (one at a time elsewhere, so taking them in order cannot deadlock),
  // then the allocation lock: no request on one of them is half way while its row goes.
  std::set<std::string> names;
  for (const auto& c : s.store->containers())
    if (c.host == host) names.insert(c.name);
  std::vector<std::unique_lock<std::mutex>> locks;
  for (const auto& n : names) locks.push_back(s.lock_container(n));
  std::lock_guard<std::mutex> alloc(s.alloc_mu);
  ForgetReport report = s.store->transaction([&] {
    check_forgettable(s, host);
    ForgetReport r = survey(s, host);
    r.dry_run = dry_run;
    if (dry_run) return r;
    meter_tick(*s.store, s.clock->now());  // their GPUs are charged up to their release
    for (const auto& m : r.moves) drop_move(s, host, m);
    s.store->forget_host_rows(host);
    audit_forget(s, r, who);
    return r;
  });
  if (!dry_run) spdlog::warn("host {} forgotten by {}: {}", host, who, report.message());
  return report;
}

Json ForgetReport::to_json() const {
  Json containers_json = Json::array();
  Json by_user = Json::object();
  for (const auto& c : containers) {
    Json ports_json = Json::array();
    for (const auto& p : c.spec.ports) ports_json.push_back(p.to_string());
    containers_json.push_back({{"name", c.name},
                               {"owner", c.owner},
                               {"state", c.state},
                               {"lease", is_lease(c)},
                               {"id", c.docker_id.substr(0, 12)},
                               {"gpu_devices", c.gpu_indices()},
                               {"gpu_uuids", c.gpu_uuids()},
                               {"ssh_port", c.ssh_port},
                               {"port_mappings", ports_json}});
    by_user[c.owner].push_back(c.name);
  }
  Json gpus_json = Json::array();
  for (const auto& g : gpus) gpus_json.push_back({{"uuid", g.uuid}, {"index", g.index}});
  Json ports_json = Json::array();
  for (const auto& [h, p] : ports) ports_json.push_back({{"host", h}, {"port", p}});
  Json moves_json = Json::array();
  for (const auto& m : moves)
    moves_json.push_back(
        {{"name", m.name}, {"from", m.source_host}, {"to", m.target_host}, {"state", m.state}});
  return {{"host", host},
          {"dry_run", dry_run},
          {"containers", containers_json},
          {"by_user", by_user},
          {"gpus_released", gpus_json},
          {"ports_released", ports_json},
          {"moves_dropped", moves_json},
          {"engine",
           "not contacted: containers still on that machine, if it exists, are left as they are"}};
}

Json ForgetReport::summary_json() const {
  int leases = 0;
  std::set<std::string> owners;
  for (const auto& c : containers) {
    leases += is_lease(c) ? 1 : 0;
    owners.insert(c.owner);
  }
  return {{"name", host},          {"containers", static_cast<int>(containers.size()) - leases},
          {"leases", leases},      {"gpus", gpus.size()},
          {"ports", ports.size()}, {"moves", moves.size()},
          {"owners", owners}};
}

std::string ForgetReport::message() const {
  const std::string what = std::to_string(containers.size()) + " container(s) on host '" + host +
                           "' (" + std::to_string(gpus.size()) + " GPU(s), " +
                           std::to_string(ports.size()) + " port(s))";
  return dry_run ? "Would forget " + what + "; nothing changed"
                 : "Forgot " + what + "; its engine was not contacted";
}

const RequestSchema& forget_host_schema() {
  static const RequestSchema s{
      "ForgetHostRequest",
      {{"name", FieldType::kString, true,
        "a host that is no longer in the config's hosts (a retired server)"},
       {"dry_run", FieldType::kBoolean, false,
        "only answer what would be forgotten; change nothing (default false)"}}};
  return s;
}

}  // namespace gpulab::service
