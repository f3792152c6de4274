// Container endpoints: the seed's status/create/list/start/stop/restart/delete/update-resources,
// plus logs and stats.
#include <set>

#include "core/strings.h"
#include "service/api/handlers.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/domain/validation.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/containers/container_ops.h"
#include "service/ops/containers/gpu_view.h"
#include "service/ops/containers/move_ops.h"
#include "service/ops/containers/refused_port.h"
#include "service/ops/policies/quota.h"

namespace gpulab::service {

std::string query_param(const ApiRequest& req, const std::string& key) {
  auto it = req.query.find(key);
  if (it == req.query.end() || it->second.empty())
    throw ApiError(ApiCode::kInvalidRequest, "Missing query parameter '" + key + "'");
  return it->second;
}

Json created_json(const CreateOutcome& out, const Service& s) {
  const ServiceConfig& config = s.config;
  Json ports = Json::array();
  for (const auto& p : out.record.spec.ports) ports.push_back(p.to_string());
  Json d = {{"name", out.record.name},
            {"ssh_port", out.record.ssh_port},
            {"gpu_devices", out.record.gpu_indices()},
            {"port_mappings", ports},
            {"gpu_uuids", out.record.gpu_uuids()},
            {"owner", out.record.owner},
            {"ssh_user", config.ssh_user}};
  // Shown once: the service keeps no copy of it.
  if (!out.ssh_password.empty()) d["ssh_password"] = out.ssh_password;
  d["host"] = out.record.host;
  if (const Host* h = s.find_host(out.record.host)) {
    if (!h->address().empty()) d["ssh_host"] = h->address();  // SSH to ssh_host:ssh_port
    d["host_state"] = h->state();
  }
  return d;
}

std::set<std::string> visible_container_names(Service& s, const Principal& who) {
  std::set<std::string> names;
  for (const auto& c : s.store->containers(who.admin ? std::nullopt : std::optional(who.user)))
    names.insert(c.name);
  return names;
}

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

// A container that came up on a new SSH port (its own was taken on its host outside this
// service meanwhile): the answer and the audit say so, as the user must connect there.
void tell_port_move(int was, int now, Json& data, std::string& message, std::string& detail) {
  if (now == was) return;
  data["ssh_port"] = now;
  data["ssh_port_was"] = was;
  message += " on a new SSH port, " + std::to_string(now) + " (its port " + std::to_string(was) +
             " was taken on its host outside this service)";
  detail += (detail.empty() ? "" : "; ") + ssh_port_change(was, now);
}

// Each host: its state, where its ports are reached, and its GPUs free and used (indices are
// per host; a host that is not up offers none: its free ones are "unoffered").
Json hosts_json(const Service& s, const std::vector<GpuEntry>& gpus) {
  Json hosts = Json::array();
  for (const auto& h : s.hosts) {
    Json free = Json::array(), used = Json::array(), unoffered = Json::array();
    size_t total = 0;
    for (const auto& g : gpus) {
      if (g.slot.host != h->name()) continue;
      ++total;
      (!g.holder.empty() ? used : g.offered ? free : unoffered).push_back(g.slot.index);
    }
    Json j = {{"name", h->name()},
              {"state", h->state()},
              {"address", h->address()},
              {"total_gpus", total},
              {"available_gpu_indices", free},
              {"used_gpu_indices", used},
              {"unoffered_gpu_indices", unoffered}};
    if (!h->up()) j["down_reason"] = h->down_reason();
    if (h->up() && !h->responsive()) j["unresponsive_reason"] = h->unresponsive_reason();
    hosts.push_back(j);
  }
  return hosts;
}

// The seed's index lists (an index repeats on every host), and the same as host-qualified ids
// ("lab1:0"): what a create can get now (available), what is held (used), and free GPUs of
// hosts that are not up (unoffered: no create gets them until the host is back).
ApiReply status(Service& s, Who who) {
  Json available = Json::array(), used = Json::array(), mapping = Json::object();
  Json available_ids = Json::array(), used_ids = Json::array(), unoffered_ids = Json::array();
  std::set<std::string> mine = visible_container_names(s, who);
  const ServiceInventory inventory = s.inventory();
  const std::vector<GpuEntry> gpus = gpu_entries(s);
  for (const auto& g : gpus) {
    if (g.holder.empty()) {
      if (g.offered) available.push_back(g.slot.index);
      (g.offered ? available_ids : unoffered_ids).push_back(g.id);
      continue;
    }
    used.push_back(g.slot.index);
    used_ids.push_back(g.id);
    if (mine.count(g.holder)) mapping[g.holder].push_back(g.slot.index);
  }
  Json d = {{"gpu_type", inventory.gpu_type}, {"available_gpu_indices", available},
            {"used_gpu_indices", used},       {"container_gpu_mapping", mapping},
            {"last_updated", iso_now()},      {"inventory_source", inventory.source},
            {"total_gpus", gpus.size()}};
  d["available_gpus"] = available_ids;
  d["used_gpus"] = used_ids;
  d["unoffered_gpus"] = unoffered_ids;
  d["quota"] = quota_json(s, who.user);  // the caller's limits and usage
  d["hosts"] = hosts_json(s, gpus);
  return ApiReply::ok("GPU status retrieved successfully", d);
}

ApiReply create(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, create_schema());
  CreateOptions o;
  o.name = j["name"].get<std::string>();  // checked by create_container, for every caller
  o.owner = who.user;
  o.spec = apply_spec_fields(j, ContainerSpec{});
  o.spec.image = j["image"].get<std::string>();
  o.host = j.value("host", std::string());  // resolved once, where the image is asked
  auto out = create_container(s, o);
  return ApiReply::ok("Container created successfully", created_json(out, s));
}

ApiReply list(Service& s, Who who) {
  auto rows = s.store->containers(who.admin ? std::nullopt : std::optional(who.user));
  // Only the hosts of the caller's rows are asked: another host's trouble is not theirs.
  std::set<std::string> hosts;
  for (const auto& c : rows) hosts.insert(c.host);
  std::map<std::string, std::string> missed;  // hosts up but slow: their rows from the book
  auto engine = engine_containers(s, nullptr, &missed, &hosts);
  Json a = Json::array();
  for (const auto& c : rows) {
    if (c.state == state::kLeased) continue;  // leases have their own list
    auto it = engine.find(c.name);
    a.push_back(container_json(c, it == engine.end() ? nullptr : &it->second, s.find_host(c.host),
                               !missed.count(c.host)));
  }
  Json d = {{"containers", a}, {"total", a.size()}, {"quota", quota_json(s, who.user)}};
  if (!missed.empty()) d["unresponsive_hosts"] = missed;
  return ApiReply::ok("Containers retrieved successfully", d);
}

template <typename Op>
ApiReply lifecycle(Service& s, Req req, Who who, const char* verb, Op op) {
  Json j = parse_request(req.body, name_schema());
  auto lock = s.lock_container(require_container(s, who, j["name"].get<std::string>()).name);
  // Read under the lock: a request or the reconciler may have changed the row (its container's
  // id after a GPU-count recreate) while this one waited.
  ContainerRecord c = require_container(s, who, j["name"].get<std::string>());
  op(s, c);
  Json data = {{"name", c.name}};
  std::string message = std::string("Container ") + verb + " successfully", detail;
  if (auto now = s.store->find_container(c.id))
    tell_port_move(c.ssh_port, now->ssh_port, data, message, detail);
  s.store->audit(who.user, verb, c.name, "ok", detail);
  return ApiReply::ok(message, data);
}

ApiReply update(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, update_resources_schema());
  std::string name = require_container(s, who, j["name"].get<std::string>()).name;
  if (j.size() == 1)
    throw ApiError(ApiCode::kInvalidRequest, "Nothing to update",
                   "give cpus, memory, pids_limit or gpu_count");
  auto lock = s.lock_container(name);
  ContainerRecord c = require_container(s, who, name);  // under the lock, as in lifecycle()
  ContainerRecord after = update_resources(s, c, j);
  // A GPU count change makes the container again, on a new SSH port if its own was taken.
  // Audited before the engine is asked for the answer's state: the change has happened.
  Json moved = Json::object();
  std::string message = "Container resources updated successfully", detail = j.dump();
  tell_port_move(c.ssh_port, after.ssh_port, moved, message, detail);
  s.store->audit(who.user, "update-resources", c.name, "ok", detail);
  // The engine's own state, as in list (without it a running container read "missing").
  std::map<std::string, std::string> missed;
  const std::set<std::string> its_host = {after.host};
  auto engine = engine_containers(s, nullptr, &missed, &its_host);
  auto it = engine.find(after.name);
  Json data = container_json(after, it == engine.end() ? nullptr : &it->second,
                             s.find_host(after.host), !missed.count(after.host));
  data.update(moved);
  return ApiReply::ok(message, data);
}

ApiReply move(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, move_schema());
  MoveOutcome out =
      move_container(s, who, j["name"].get<std::string>(), j["host"].get<std::string>());
  Json d = container_json(out.record, nullptr, s.find_host(out.record.host));
  d["moved_from"] = out.from;
  d["image_bytes"] = out.bytes;
  d["seconds"] = out.seconds;
  d["commit_seconds"] = out.commit_seconds;
  d["stream_seconds"] = out.stream_seconds;
  return ApiReply::ok("Container moved successfully", d);
}

ApiReply logs(Service& s, Req req, Who who) {
  ContainerRecord c = require_container(s, who, query_param(req, "name"));
  LogQuery lo;
  if (req.query.count("tail")) {
    const auto tail = parse_int(req.query.at("tail"));
    if (!tail || *tail < -1 || *tail > 1000000)  // -1: every line
      throw ApiError(ApiCode::kInvalidRequest, "tail must be a number of lines (-1: all)");
    lo.tail = static_cast<int>(*tail);
  } else {
    lo.tail = 200;
  }
  auto out = s.engine_of(c).logs(c.engine_ref(), lo);
  if (!out) throw_engine_error(out.error());
  return ApiReply::ok("Container logs retrieved successfully",
                      {{"name", c.name}, {"stdout", out->out}, {"stderr", out->err}});
}

ApiReply stats(Service& s, Req req, Who who) {
  ContainerRecord c = require_container(s, who, query_param(req, "name"));
  auto st = s.engine_of(c).usage(c.engine_ref());
  if (!st) throw_engine_error(st.error());
  Json gpus = Json::array();
  auto samples = s.sample_gpus();
  for (const auto& g : c.gpus) {
    Json gj = {{"index", g.index}, {"uuid", g.uuid}};
    for (const auto& smp : samples) {
      if (smp.uuid != g.uuid) continue;
      if (smp.utilization_percent) gj["utilization_percent"] = *smp.utilization_percent;
      if (smp.memory_used_bytes) gj["memory_used_bytes"] = *smp.memory_used_bytes;
      if (smp.temperature_c) gj["temperature_c"] = *smp.temperature_c;
      if (smp.power_mw) gj["power_mw"] = *smp.power_mw;
    }
    gpus.push_back(gj);
  }
  return ApiReply::ok("Container stats retrieved successfully",
                      {{"name", c.name},
                       {"cpu_percent", st->cpu_percent},
                       {"online_cpus", st->online_cpus},
                       {"memory_usage_bytes", st->memory_usage_bytes},
                       {"memory_limit_bytes", st->memory_limit_bytes},
                       {"memory_percent", st->memory_percent},
                       {"net_rx_bytes", st->net_rx_bytes},
                       {"net_tx_bytes", st->net_tx_bytes},
                       {"block_read_bytes", st->block_read_bytes},
                       {"block_write_bytes", st->block_write_bytes},
                       {"pids", st->pids},
                       {"gpus", gpus}});
}

}  // namespace

void add_container_routes(Router& r, Service& s) {
  const std::string b = kApiBase;
  Service* sp = &s;
  r.add({.method = "GET",
         .path = b + "/status",
         .handler = [sp](Req, Who w) { return status(*sp, w); },
         .summary = "GPU status: free and used GPU indices and which container holds which",
         .tag = "containers"});
  r.add({.method = "POST",
         .path = b + "/create",
         .handler = [sp](Req q, Who w) { return create(*sp, q, w); },
         .summary = "Create and start a container with GPUs, an SSH port and port mappings",
         .tag = "containers",
         .schema = &create_schema()});
  r.add({.method = "GET",
         .path = b + "/list",
         .handler = [sp](Req, Who w) { return list(*sp, w); },
         .summary = "List your containers (admins: all)",
         .tag = "containers"});
  r.add({.method = "POST",
         .path = b + "/start",
         .handler = [sp](Req q, Who w) { return lifecycle(*sp, q, w, "started", start_container); },
         .summary = "Start a stopped container",
         .tag = "containers",
         .schema = &name_schema()});
  r.add({.method = "POST",
         .path = b + "/stop",
         .handler = [sp](Req q, Who w) { return lifecycle(*sp, q, w, "stopped", stop_container); },
         .summary = "Stop a container (it keeps its GPUs and ports)",
         .tag = "containers",
         .schema = &name_schema()});
  r.add({.method = "POST",
         .path = b + "/restart",
         .handler = [sp](Req q,
                         Who w) { return lifecycle(*sp, q, w, "restarted", restart_container); },
         .summary = "Restart a container",
         .tag = "containers",
         .schema = &name_schema()});
  r.add(
      {.method = "POST",
       .path = b + "/delete",
       .handler = [sp](Req q, Who w) { return lifecycle(*sp, q, w, "deleted", delete_container); },
       .summary = "Delete a container and release its GPUs and ports",
       .tag = "containers",
       .schema = &name_schema()});
  r.add({.method = "POST",
         .path = b + "/update-resources",
         .handler = [sp](Req q, Who w) { return update(*sp, q, w); },
         .summary = "Change cpus, memory, pids_limit (live) or gpu_count (commit and recreate)",
         .tag = "containers",
         .schema = &update_resources_schema()});
  r.add({.method = "POST",
         .path = b + "/move",
         .handler = [sp](Req q, Who w) { return move(*sp, q, w); },
         .summary = "Move a stopped container to another host (its writable layer, name, owner, "
                    "SSH password, limits, ports and GPU count); it stays stopped",
         .tag = "containers",
         .schema = &move_schema()});
  r.add({.method = "GET",
         .path = b + "/logs",
         .handler = [sp](Req q, Who w) { return logs(*sp, q, w); },
         .summary = "A container's recent output",
         .tag = "monitoring",
         .query_params = {"name", "tail"}});
  r.add({.method = "GET",
         .path = b + "/stats",
         .handler = [sp](Req q, Who w) { return stats(*sp, q, w); },
         .summary = "A container's CPU, memory, network, disk I/O and GPU use",
         .tag = "monitoring",
         .query_params = {"name"}});
}

}  // namespace gpulab::service
