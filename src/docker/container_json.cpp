// JSON both ways for containers: the create/update bodies we send, and the inspect/list answers
// we read back into typed structs.

#include "docker/client_internal.h"
#include "docker/types.h"

namespace gpulab::docker {

using detail::boolean;
using detail::child;
using detail::num;
using detail::str;
using detail::string_map;
using detail::strings;

namespace {

Json restart_json(const RestartPolicy& p) {
  return Json{{"Name", p.name == "no" ? std::string() : p.name},
              {"MaximumRetryCount", p.maximum_retry_count}};
}

std::string port_key(int port, const std::string& proto) {
  return std::to_string(port) + "/" + (proto.empty() ? std::string("tcp") : proto);
}

// "22/tcp" -> {22, "tcp"}.
std::pair<int, std::string> split_port_key(const std::string& key) {
  auto slash = key.find('/');
  int port = 0;
  try {
    port = std::stoi(key.substr(0, slash));
  } catch (...) {
  }
  return {port, slash == std::string::npos ? "tcp" : key.substr(slash + 1)};
}

int to_port(const Json& v) {
  try {
    if (v.is_string() && !v.get<std::string>().empty()) return std::stoi(v.get<std::string>());
    if (v.is_number()) return v.get<int>();
  } catch (...) {
  }
  return 0;
}

// {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "2211"}], ...} -> flat list.
std::vector<PublishedPort> ports_from_map(const Json& m) {
  std::vector<PublishedPort> out;
  if (!m.is_object()) return out;
  for (auto it = m.begin(); it != m.end(); ++it) {
    auto [port, proto] = split_port_key(it.key());
    if (!it->is_array()) continue;
    for (const auto& b : *it) {
      PublishedPort p;
      p.container_port = port;
      p.protocol = proto;
      p.host_ip = str(b, "HostIp");
      p.host_port = to_port(child(b, "HostPort"));
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace

Json CreateSpec::to_json() const {
  Json j;
  j["Image"] = image;
  if (!cmd.empty()) j["Cmd"] = cmd;
  if (entrypoint) j["Entrypoint"] = *entrypoint;
  if (!env.empty()) j["Env"] = env;
  j["Labels"] = labels;
  if (!hostname.empty()) j["Hostname"] = hostname;
  if (!working_dir.empty()) j["WorkingDir"] = working_dir;
  if (!user.empty()) j["User"] = user;
  j["Tty"] = tty;
  j["OpenStdin"] = open_stdin;
  if (stop_timeout_s) j["StopTimeout"] = *stop_timeout_s;

  Json host;
  Json exposed = Json::object(), bindings = Json::object();
  for (const auto& p : ports) {
    std::string key = port_key(p.container_port, p.protocol);
    exposed[key] = Json::object();
    bindings[key].push_back(
        Json{{"HostIp", p.host_ip},
             {"HostPort", p.host_port > 0 ? std::to_string(p.host_port) : std::string()}});
  }
  if (!ports.empty()) {
    j["ExposedPorts"] = exposed;
    host["PortBindings"] = bindings;
  }
  if (nano_cpus > 0) host["NanoCpus"] = nano_cpus;
  if (memory_bytes > 0) host["Memory"] = memory_bytes;
  if (shm_size_bytes > 0) host["ShmSize"] = shm_size_bytes;
  if (pids_limit > 0) host["PidsLimit"] = pids_limit;
  if (!gpus.empty()) {
    Json reqs = Json::array();
    for (const auto& g : gpus) {
      Json r{{"Driver", g.driver}, {"Capabilities", g.capabilities}, {"Options", Json::object()}};
      if (!g.device_ids.empty())
        r["DeviceIDs"] = g.device_ids;
      else
        r["Count"] = g.count;
      reqs.push_back(r);
    }
    host["DeviceRequests"] = reqs;
  }
  if (!devices.empty()) {
    Json devs = Json::array();
    for (const auto& d : devices)
      devs.push_back(
          {{"PathOnHost", d.path_on_host},
           {"PathInContainer", d.path_in_container.empty() ? d.path_on_host : d.path_in_container},
           {"CgroupPermissions", d.cgroup_permissions}});
    host["Devices"] = devs;
  }
  if (!group_add.empty()) host["GroupAdd"] = group_add;
  host["RestartPolicy"] = restart_json(restart_policy);
  if (init) host["Init"] = true;
  if (auto_remove) host["AutoRemove"] = true;
  j["HostConfig"] = host;
  return j;
}

Json ResourceUpdate::to_json() const {
  Json j = Json::object();
  if (nano_cpus) j["NanoCpus"] = *nano_cpus;
  if (memory_bytes) j["Memory"] = *memory_bytes;
  if (memory_swap_bytes) j["MemorySwap"] = *memory_swap_bytes;
  if (pids_limit) j["PidsLimit"] = *pids_limit;
  if (restart_policy) j["RestartPolicy"] = restart_json(*restart_policy);
  return j;
}

namespace detail {

ContainerInfo parse_container_info(Json j) {
  ContainerInfo c;
  c.id = str(j, "Id");
  c.name = str(j, "Name");
  if (!c.name.empty() && c.name[0] == '/') c.name.erase(0, 1);
  c.image_id = str(j, "Image");
  c.created = str(j, "Created");
  c.restart_count = static_cast<int>(num(j, "RestartCount"));
  const Json& state = child(j, "State");
  c.status = str(state, "Status");
  c.running = boolean(state, "Running");
  c.exit_code = static_cast<int>(num(state, "ExitCode"));
  c.pid = static_cast<int>(num(state, "Pid"));
  c.started_at = str(state, "StartedAt");
  c.finished_at = str(state, "FinishedAt");
  c.error = str(state, "Error");
  const Json& config = child(j, "Config");
  c.image = str(config, "Image");
  c.tty = boolean(config, "Tty");
  c.labels = string_map(config, "Labels");
  c.env = strings(config, "Env");
  c.cmd = strings(config, "Cmd");
  const Json& host = child(j, "HostConfig");
  c.nano_cpus = num(host, "NanoCpus");
  c.memory_bytes = num(host, "Memory");
  c.shm_size_bytes = num(host, "ShmSize");
  c.pids_limit = num(host, "PidsLimit");
  const Json& rp = child(host, "RestartPolicy");
  c.restart_policy.name = str(rp, "Name");
  if (c.restart_policy.name.empty()) c.restart_policy.name = "no";
  c.restart_policy.maximum_retry_count = static_cast<int>(num(rp, "MaximumRetryCount"));
  for (const auto& r : child(host, "DeviceRequests")) {
    GpuRequest g;
    g.driver = str(r, "Driver");
    g.device_ids = strings(r, "DeviceIDs");
    g.count = static_cast<int>(num(r, "Count"));
    g.capabilities.clear();
    for (const auto& caps : child(r, "Capabilities"))
      if (caps.is_array()) g.capabilities.push_back(caps.get<std::vector<std::string>>());
    c.gpus.push_back(g);
  }
  for (const auto& d : child(host, "Devices"))
    c.devices.push_back(
        {str(d, "PathOnHost"), str(d, "PathInContainer"), str(d, "CgroupPermissions")});
  const Json& net = child(j, "NetworkSettings");
  c.ip_address = str(net, "IPAddress");
  c.ports =
      c.running ? ports_from_map(child(net, "Ports")) : ports_from_map(child(host, "PortBindings"));
  // Published ports with no host side (exposed only) show as null: drop those.
  std::erase_if(c.ports, [](const PublishedPort& p) { return p.container_port == 0; });
  c.raw = std::move(j);
  return c;
}

ContainerSummary parse_container_summary(const Json& j) {
  ContainerSummary s;
  s.id = str(j, "Id");
  auto names = strings(j, "Names");
  if (!names.empty()) s.name = names[0].starts_with('/') ? names[0].substr(1) : names[0];
  s.image = str(j, "Image");
  s.image_id = str(j, "ImageID");
  s.state = str(j, "State");
  s.status = str(j, "Status");
  s.created = num(j, "Created");
  s.labels = string_map(j, "Labels");
  for (const auto& p : child(j, "Ports")) {
    PublishedPort pp;
    pp.container_port = static_cast<int>(num(p, "PrivatePort"));
    pp.protocol = str(p, "Type", "tcp");
    pp.host_ip = str(p, "IP");
    pp.host_port = static_cast<int>(num(p, "PublicPort"));
    s.ports.push_back(pp);
  }
  return s;
}

}  // namespace detail
}  // namespace gpulab::docker
