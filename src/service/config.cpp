// Loads and checks the service config file; every key is known, every device path declared.
#include "service/config.h"

#include <sys/stat.h>

#include <set>

#include "core/files.h"
#include "core/json.h"
#include "core/strings.h"

namespace gpulab::service {

namespace {

Error bad(const std::string& msg) {
  return Error{Code::kInvalidArgument, "config: " + msg,
               "see docs/service.md for the config file's keys"};
}

Status check_keys(const Json& j, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    if (!allowed.count(key)) return bad("unknown key '" + key + "' in " + where);
  }
  return ok_status();
}

Result<GpuSlot> gpu_from_json(const Json& g, size_t position) {
  std::string where = "gpus[" + std::to_string(position) + "]";
  if (!g.is_object()) return bad(where + " must be an object");
  auto st = check_keys(g,
                       {"uuid", "index", "vendor", "name", "numa_node", "links", "render_node",
                        "render_node_in_container"},
                       where);
  if (!st) return st.error();
  GpuSlot s;
  try {
    s.uuid = g.at("uuid").get<std::string>();
    s.index = g.value("index", static_cast<int>(position));
    s.vendor = g.at("vendor").get<std::string>();
    s.name = g.value("name", std::string());
    s.numa_node = g.value("numa_node", -1);
    s.links = g.value("links", std::vector<int>{});
    s.render_node = g.value("render_node", std::string());
    s.render_node_in_container = g.value("render_node_in_container", s.render_node);
  } catch (const Json::exception& e) {
    return bad(where + ": " + e.what());
  }
  if (s.vendor != "nvidia" && s.vendor != "amd")
    return bad(where + ": vendor must be nvidia or amd");
  if (s.uuid.empty()) return bad(where + ": uuid is empty");
  return s;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || starts_with(host, "127.");
}

Status parse_listen(const std::string& text, ServiceConfig& config) {
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Error{Code::kInvalidArgument, "--listen: expected [ADDR]:PORT, got '" + text + "'"};
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos)
      return Error{Code::kInvalidArgument, "--listen: expected ADDR:PORT, got '" + text + "'"};
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  int p = 0;
  try {
    size_t used = 0;
    p = std::stoi(port, &used);
    if (used != port.size()) p = -1;
  } catch (...) {
    p = -1;
  }
  if (p < 0 || p > 65535 || host.empty())
    return Error{Code::kInvalidArgument, "--listen: bad address '" + text + "'"};
  config.listen_host = host;
  config.listen_port = static_cast<uint16_t>(p);
  return ok_status();
}

Result<ServiceConfig> config_from_json(const std::string& text) {
  auto parsed = parse_json(text, "config file");
  if (!parsed) return parsed.error();
  const Json& j = *parsed;
  if (!j.is_object()) return bad("top level must be an object");
  auto st = check_keys(j,
                       {"listen",
                        "docker_host",
                        "db",
                        "backup_dir",
                        "ssh_port_base",
                        "ssh_port_step",
                        "port_rest_seconds",
                        "auth_required",
                        "image_allowlist",
                        "allocation_policy",
                        "gpus",
                        "detect_gpus",
                        "device_mode",
                        "amd_kfd_path",
                        "amd_kfd_in_container",
                        "max_body_bytes",
                        "max_upload_bytes",
                        "request_timeout_seconds",
                        "idle_timeout_seconds",
                        "worker_threads",
                        "stop_timeout_seconds",
                        "reconcile_interval_seconds",
                        "idle_check_interval_seconds",
                        "lease_grace_seconds",
                        "users",
                        "ssh_user",
                        "dashboard"},
                       "config");
  if (!st) return st.error();
  ServiceConfig c;
  try {
    if (j.contains("listen")) {
      auto ls = parse_listen(j["listen"].get<std::string>(), c);
      if (!ls) return ls.error();
    }
    c.docker_host = j.value("docker_host", c.docker_host);
    c.db_path = j.value("db", c.db_path);
    c.backup_dir = j.value("backup_dir", c.backup_dir);
    c.ssh_port_base = j.value("ssh_port_base", c.ssh_port_base);
    c.ssh_port_step = j.value("ssh_port_step", c.ssh_port_step);
    c.port_rest_seconds = j.value("port_rest_seconds", c.port_rest_seconds);
    c.auth_required = j.value("auth_required", c.auth_required);
    c.image_allowlist = j.value("image_allowlist", c.image_allowlist);
    c.allocation_policy = j.value("allocation_policy", c.allocation_policy);
    c.detect_gpus = j.value("detect_gpus", c.detect_gpus);
    std::string mode = j.value("device_mode", std::string("map"));
    if (mode == "map") {
      c.device_mode = DeviceMode::kMap;
    } else if (mode == "none") {
      c.device_mode = DeviceMode::kNone;
    } else {
      return bad("device_mode must be \"map\" or \"none\"");
    }
    c.amd_kfd_path = j.value("amd_kfd_path", c.amd_kfd_path);
    c.amd_kfd_in_container = j.value("amd_kfd_in_container", c.amd_kfd_in_container);
    c.max_body_bytes = j.value("max_body_bytes", c.max_body_bytes);
    c.max_upload_bytes = j.value("max_upload_bytes", c.max_upload_bytes);
    c.request_timeout_seconds = j.value("request_timeout_seconds", c.request_timeout_seconds);
    c.idle_timeout_seconds = j.value("idle_timeout_seconds", c.idle_timeout_seconds);
    c.worker_threads = j.value("worker_threads", c.worker_threads);
    c.stop_timeout_seconds = j.value("stop_timeout_seconds", c.stop_timeout_seconds);
    c.reconcile_interval_seconds =
        j.value("reconcile_interval_seconds", c.reconcile_interval_seconds);
    c.lease_grace_seconds = j.value("lease_grace_seconds", c.lease_grace_seconds);
    c.idle_check_interval_seconds =
        j.value("idle_check_interval_seconds", c.idle_check_interval_seconds);
    c.ssh_user = j.value("ssh_user", c.ssh_user);
    if (j.contains("dashboard")) {
      const Json& d = j["dashboard"];
      if (!d.is_object()) return bad("dashboard must be an object");
      auto ds =
          check_keys(d, {"sample_seconds", "history_seconds", "gpu_sample_root"}, "dashboard");
      if (!ds) return ds.error();
      c.dashboard.sample_seconds = d.value("sample_seconds", c.dashboard.sample_seconds);
      c.dashboard.history_seconds = d.value("history_seconds", c.dashboard.history_seconds);
      c.dashboard.gpu_sample_root = d.value("gpu_sample_root", c.dashboard.gpu_sample_root);
      if (c.dashboard.sample_seconds < 1 ||
          c.dashboard.history_seconds < c.dashboard.sample_seconds)
        return bad("dashboard: sample_seconds must be >= 1 and history_seconds >= sample_seconds");
    }
    if (j.contains("gpus")) {
      if (!j["gpus"].is_array()) return bad("gpus must be an array");
      size_t i = 0;
      for (const auto& g : j["gpus"]) {
        auto slot = gpu_from_json(g, i++);
        if (!slot) return slot.error();
        c.gpus.push_back(std::move(*slot));
      }
    }
    if (j.contains("users")) {
      for (const auto& u : j["users"]) {
        auto us = check_keys(u, {"name", "admin", "token_sha256"}, "users[]");
        if (!us) return us.error();
        c.users.push_back(UserSeed{u.at("name").get<std::string>(), u.value("admin", false),
                                   u.at("token_sha256").get<std::string>()});
      }
    }
  } catch (const Json::exception& e) {
    return bad(e.what());
  }
  return c;
}

Result<ServiceConfig> load_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return Error{Code::kInvalidArgument, "cannot read config file " + path};
  return config_from_json(*text);
}

Status validate_config(const ServiceConfig& c) {
  if (c.ssh_port_base < 1 || c.ssh_port_base + c.ssh_port_step > 65535 || c.ssh_port_step < 1)
    return bad("ssh_port_base/ssh_port_step give no SSH port in 1..65535");
  if (c.allocation_policy != "pack" && c.allocation_policy != "spread")
    return bad("allocation_policy must be \"pack\" or \"spread\"");
  if (c.worker_threads < 1 || c.worker_threads > 1024) return bad("worker_threads out of range");
  if (c.idle_check_interval_seconds < 1 || c.idle_check_interval_seconds > 86400)
    return bad("idle_check_interval_seconds must be 1..86400");
  std::set<std::string> uuids;
  std::set<int> indices;
  for (const auto& g : c.gpus) {
    if (!uuids.insert(g.uuid).second) return bad("GPU uuid " + g.uuid + " declared twice");
    if (!indices.insert(g.index).second)
      return bad("GPU index " + std::to_string(g.index) + " declared twice");
  }
  // In map mode every device path we would hand to the engine must exist and be a character
  // device: the service maps exactly these declared paths and nothing else.
  if (c.device_mode == DeviceMode::kMap) {
    auto is_char_device = [](const std::string& p) {
      struct stat st {};
      return ::stat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
    };
    bool any_amd = false;
    for (const auto& g : c.gpus) {
      if (g.vendor != "amd") continue;
      any_amd = true;
      if (g.render_node.empty())
        return bad("AMD GPU " + g.uuid + " has no render_node (or use device_mode \"none\")");
      if (!is_char_device(g.render_node))
        return bad("render_node " + g.render_node + " of GPU " + g.uuid +
                   " is not a character device on this host (use device_mode \"none\" for "
                   "declared GPUs without devices)");
    }
    if (any_amd && !is_char_device(c.amd_kfd_path))
      return bad("amd_kfd_path " + c.amd_kfd_path + " is not a character device on this host");
  }
  return ok_status();
}

}  // namespace gpulab::service
