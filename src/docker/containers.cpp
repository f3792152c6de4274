// Container lifecycle calls: create, start, stop, restart, kill, remove, inspect, list, update,
// rename, wait.
#include "core/strings.h"
#include "docker/client.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

using detail::call;
using detail::call_json;
using detail::Query;

namespace {

HttpRequest make(std::string method, std::string target, std::chrono::seconds timeout) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.timeout = timeout;
  return r;
}

HttpRequest json_post(std::string target, const Json& body, std::chrono::seconds timeout) {
  HttpRequest r = make("POST", std::move(target), timeout);
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = body.dump();
  return r;
}

std::string id_path(const std::string& id) {
  return "/containers/" + url_encode(id);
}

Status to_status(const Result<HttpResponse>& r) {
  if (!r.ok()) return r.error();
  return ok_status();
}

// Rejects what the engine would reject anyway, with a message naming our field.
Status validate(const CreateSpec& spec) {
  if (!spec.name.empty() && !valid_container_name(spec.name))
    return Error(Code::kInvalidArgument, "invalid container name '" + spec.name + "'",
                 "use letters, digits, '_', '.', '-', starting with a letter or digit");
  if (spec.image.empty()) return Error(Code::kInvalidArgument, "no image given for the container");
  for (const auto& p : spec.ports) {
    if (p.container_port < 1 || p.container_port > 65535 || p.host_port < 0 || p.host_port > 65535)
      return Error(Code::kInvalidArgument,
                   "port out of range: " + std::to_string(p.host_port) + ":" +
                       std::to_string(p.container_port),
                   "ports are 1-65535");
    if (p.protocol != "tcp" && p.protocol != "udp" && p.protocol != "sctp")
      return Error(Code::kInvalidArgument, "unknown port protocol '" + p.protocol + "'",
                   "use tcp or udp");
  }
  if (spec.nano_cpus < 0 || spec.memory_bytes < 0 || spec.shm_size_bytes < 0 || spec.pids_limit < 0)
    return Error(Code::kInvalidArgument, "negative resource limit for container " + spec.name);
  for (const auto& d : spec.devices)
    if (!starts_with(d.path_on_host, "/dev/"))
      return Error(Code::kInvalidArgument, "device '" + d.path_on_host + "' is not under /dev",
                   "only device nodes can be passed to a container");
  return ok_status();
}

}  // namespace

Result<std::string> Client::create_container(const CreateSpec& spec) const {
  return create_container(spec, HostAccess{});
}

Result<std::string> Client::create_container(const CreateSpec& spec, const HostAccess& host) const {
  if (auto v = validate(spec); !v.ok()) return v.error();
  Json body = spec.to_json();
  for (const auto& m : host.mounts) {
    if (!starts_with(m.host_path, "/") || !starts_with(m.container_path, "/"))
      return Error(Code::kInvalidArgument, "bind mount " + m.host_path + " -> " + m.container_path +
                                               ": paths must be absolute");
    body["HostConfig"]["Mounts"].push_back(Json{{"Type", "bind"},
                                                {"Source", m.host_path},
                                                {"Target", m.container_path},
                                                {"ReadOnly", m.read_only}});
  }
  if (host.host_network) {
    body["HostConfig"]["NetworkMode"] = "host";
    body["HostConfig"].erase("PortBindings");
    body.erase("ExposedPorts");
  }
  std::string what = "create container " + (spec.name.empty() ? spec.image : spec.name);
  auto j = call_json(*transport_,
                     json_post(path("/containers/create" + Query().add("name", spec.name).str()),
                               body, std::chrono::seconds(60)),
                     what);
  if (!j.ok()) {
    Error e = j.error();
    // "No such image" is a 404 too: say which.
    if (e.code == Code::kNotFound && e.hint.empty())
      e.hint = "build or load the image " + spec.image + " first (no registry pull is done)";
    return e;
  }
  return detail::str(*j, "Id");
}

Status Client::start_container(const std::string& id) const {
  return to_status(call(*transport_,
                        make("POST", path(id_path(id) + "/start"), std::chrono::seconds(120)),
                        "start container " + id));
}

Status Client::stop_container(const std::string& id, int timeout_s) const {
  return to_status(
      call(*transport_,
           make("POST", path(id_path(id) + "/stop" + Query().add("t", (long long)timeout_s).str()),
                std::chrono::seconds(timeout_s + 60)),
           "stop container " + id));
}

Status Client::restart_container(const std::string& id, int timeout_s) const {
  return to_status(call(
      *transport_,
      make("POST", path(id_path(id) + "/restart" + Query().add("t", (long long)timeout_s).str()),
           std::chrono::seconds(timeout_s + 120)),
      "restart container " + id));
}

Status Client::kill_container(const std::string& id, const std::string& signal) const {
  return to_status(
      call(*transport_,
           make("POST", path(id_path(id) + "/kill" + Query().add("signal", signal).str()),
                std::chrono::seconds(30)),
           "kill container " + id));
}

Status Client::remove_container(const std::string& id, bool force, bool volumes) const {
  return to_status(
      call(*transport_,
           make("DELETE", path(id_path(id) + Query().add("force", force).add("v", volumes).str()),
                std::chrono::seconds(120)),
           "remove container " + id));
}

Result<ContainerInfo> Client::inspect_container(const std::string& id) const {
  auto j =
      call_json(*transport_, make("GET", path(id_path(id) + "/json"), std::chrono::seconds(30)),
                "inspect container " + id);
  if (!j.ok()) return j.error();
  return detail::parse_container_info(std::move(*j));
}

Result<std::vector<ContainerSummary>> Client::list_containers(const ListOptions& o) const {
  std::string f = detail::filters(
      {{"label", o.labels}, {"name", o.names}, {"id", o.ids}, {"status", o.statuses}});
  auto j = call_json(
      *transport_,
      make("GET", path("/containers/json" + Query().add("all", o.all).add("filters", f).str()),
           std::chrono::seconds(30)),
      "list containers");
  if (!j.ok()) return j.error();
  std::vector<ContainerSummary> out;
  for (const auto& c : *j) out.push_back(detail::parse_container_summary(c));
  return out;
}

Status Client::update_container(const std::string& id, const ResourceUpdate& update) const {
  return to_status(
      call(*transport_,
           json_post(path(id_path(id) + "/update"), update.to_json(), std::chrono::seconds(30)),
           "update container " + id));
}

Status Client::rename_container(const std::string& id, const std::string& new_name) const {
  if (!valid_container_name(new_name))
    return Error(Code::kInvalidArgument, "invalid container name '" + new_name + "'",
                 "use letters, digits, '_', '.', '-', starting with a letter or digit");
  return to_status(
      call(*transport_,
           make("POST", path(id_path(id) + "/rename" + Query().add("name", new_name).str()),
                std::chrono::seconds(30)),
           "rename container " + id + " to " + new_name));
}

Result<int> Client::wait_container(const std::string& id, const std::string& condition) const {
  HttpRequest r =
      make("POST", path(id_path(id) + "/wait" + Query().add("condition", condition).str()),
           std::chrono::seconds(0));
  auto j = call_json(*transport_, r, "wait for container " + id);
  if (!j.ok()) return j.error();
  const Json& err = detail::child(*j, "Error");
  if (err.is_object() && !detail::str(err, "Message").empty())
    return Error(Code::kInternal, "wait for container " + id + ": " + detail::str(err, "Message"));
  return static_cast<int>(detail::num(*j, "StatusCode", -1));
}

}  // namespace gpulab::docker
