// Loads and checks the service config file; every key is known, every device path declared.
#include "service/base/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <vector>

#include "core/files.h"
#include "core/json.h"
#include "core/strings.h"
#include "service/base/tls_files.h"

namespace gpulab::service {

namespace {

Error bad(const std::string& msg) {
  return Error{Code::kInvalidArgument, "config: " + msg,
               "see docs/service.md for the config file's keys"};
}

// A refusal of a hosts[] field: its hint points to where hosts are described.
Error bad_host(const std::string& msg) {
  return Error{Code::kInvalidArgument, "config: " + msg,
               "see docs/engines.md#many-hosts for the fields of hosts[]"};
}

// One entry per config key: its name and how it is read into T. The table is both the list of
// known keys (anything else is refused) and the reader, so a key cannot be known but unread.
template <typename T>
struct Key {
  const char* name;
  std::function<Status(const Json&, T&)> read;
  bool required = false;
};

// A key read straight into a member of the same JSON type.
template <typename T, typename M>
Key<T> member(const char* name, M T::*field, bool required = false) {
  return {name,
          [field](const Json& v, T& out) {
            out.*field = v.get<M>();
            return ok_status();
          },
          required};
}

// Refuses unknown keys and missing required ones, then reads the given keys in table order.
template <typename T>
Status read_keys(const Json& j, const std::vector<Key<T>>& keys, T& out, const std::string& where) {
  if (!j.is_object()) return bad(where + " must be an object");
  for (const auto& item : j.items()) {
    // A plain variable, not a structured binding: clang 14 (make sanitize) cannot capture those.
    const std::string& name = item.key();
    bool known =
        std::any_of(keys.begin(), keys.end(), [&](const Key<T>& k) { return name == k.name; });
    if (!known) return bad("unknown key '" + name + "' in " + where);
  }
  for (const auto& k : keys) {
    if (!j.contains(k.name)) {
      if (k.required) return bad(where + ": missing key '" + k.name + "'");
      continue;
    }
    try {
      if (auto st = k.read(j[k.name], out); !st) return st;
    } catch (const Json::exception& e) {
      return bad(where + "." + k.name + ": " + e.what());
    }
  }
  return ok_status();
}

const std::vector<Key<GpuSlot>>& gpu_keys() {
  using G = GpuSlot;
  static const std::vector<Key<G>> keys = {
      member("uuid", &G::uuid, true),
      member("index", &G::index),
      member("vendor", &G::vendor, true),
      member("name", &G::name),
      member("numa_node", &G::numa_node),
      member("links", &G::links),
      member("render_node", &G::render_node),
      member("render_node_in_container", &G::render_node_in_container)};
  return keys;
}

// A `gpus` array (top level, or one host's) read into `out`; `at` names it in errors.
Status read_gpu_list(const Json& v, std::vector<GpuSlot>& out, const std::string& at) {
  if (!v.is_array()) return bad(at + " must be an array");
  for (size_t i = 0; i < v.size(); ++i) {
    std::string where = at + "[" + std::to_string(i) + "]";
    GpuSlot s;
    s.index = static_cast<int>(i);
    if (auto st = read_keys(v[i], gpu_keys(), s, where); !st) return st;
    if (!v[i].contains("render_node_in_container")) s.render_node_in_container = s.render_node;
    if (s.vendor != "nvidia" && s.vendor != "amd")
      return bad(where + ": vendor must be nvidia or amd");
    if (s.uuid.empty()) return bad(where + ": uuid is empty");
    out.push_back(std::move(s));
  }
  return ok_status();
}

Status read_gpus(const Json& v, ServiceConfig& c) {
  return read_gpu_list(v, c.gpus, "gpus");
}

Status read_hosts(const Json& v, ServiceConfig& c) {
  using H = HostConfig;
  static const std::vector<Key<H>> keys = {
      member("name", &H::name, true),
      member("url", &H::url, true),
      member("tls_ca", &H::tls_ca),
      member("tls_cert", &H::tls_cert),
      member("tls_key", &H::tls_key),
      member("tls_client_ca", &H::tls_client_ca),
      member("insecure", &H::insecure),
      member("address", &H::address),
      member("bind_ip", &H::bind_ip),
      member("probe_image", &H::probe_image),
      member("probe_root", &H::probe_root),
      {"gpus", [](const Json& g, H& h) { return read_gpu_list(g, h.gpus, "hosts[].gpus"); }}};
  if (!v.is_array() || v.empty()) return bad_host("hosts must be a non-empty array");
  for (size_t i = 0; i < v.size(); ++i) {
    HostConfig h;
    if (auto st = read_keys(v[i], keys, h, "hosts[" + std::to_string(i) + "]"); !st) return st;
    for (auto& g : h.gpus) g.host = h.name;
    c.hosts.push_back(std::move(h));
  }
  return ok_status();
}

Status read_users(const Json& v, ServiceConfig& c) {
  using U = UserSeed;
  static const std::vector<Key<U>> keys = {member("name", &U::name, true),
                                           member("admin", &U::admin),
                                           member("token_sha256", &U::token_sha256, true)};
  if (!v.is_array()) return bad("users must be an array");
  for (const auto& u : v) {
    UserSeed seed;
    if (auto st = read_keys(u, keys, seed, "users[]"); !st) return st;
    c.users.push_back(std::move(seed));
  }
  return ok_status();
}

Status read_dashboard(const Json& v, ServiceConfig& c) {
  using D = DashboardConfig;
  static const std::vector<Key<D>> keys = {member("sample_seconds", &D::sample_seconds),
                                           member("history_seconds", &D::history_seconds),
                                           member("gpu_sample_root", &D::gpu_sample_root)};
  if (auto st = read_keys(v, keys, c.dashboard, "dashboard"); !st) return st;
  if (c.dashboard.sample_seconds < 1 || c.dashboard.history_seconds < c.dashboard.sample_seconds)
    return bad("dashboard: sample_seconds must be >= 1 and history_seconds >= sample_seconds");
  return ok_status();
}

Status read_device_mode(const Json& v, ServiceConfig& c) {
  std::string mode = v.get<std::string>();
  if (mode == "map") {
    c.device_mode = DeviceMode::kMap;
  } else if (mode == "none") {
    c.device_mode = DeviceMode::kNone;
  } else {
    return bad("device_mode must be \"map\" or \"none\"");
  }
  return ok_status();
}

// The config file's keys (docs/service.md), in the order they are read.
const std::vector<Key<ServiceConfig>>& config_keys() {
  using C = ServiceConfig;
  static const std::vector<Key<C>> keys = {
      {"listen", [](const Json& v, C& c) { return parse_listen(v.get<std::string>(), c); }},
      member("docker_host", &C::docker_host),
      member("db", &C::db_path),
      member("backup_dir", &C::backup_dir),
      member("ssh_port_base", &C::ssh_port_base),
      member("ssh_port_step", &C::ssh_port_step),
      member("port_rest_seconds", &C::port_rest_seconds),
      member("auth_required", &C::auth_required),
      member("tls_cert", &C::tls_cert),
      member("tls_key", &C::tls_key),
      member("insecure_http", &C::insecure_http),
      member("auth_failures_before_throttle", &C::auth_failures_before_throttle),
      member("image_allowlist", &C::image_allowlist),
      member("allocation_policy", &C::allocation_policy),
      member("detect_gpus", &C::detect_gpus),
      member("probe_image", &C::probe_image),
      member("probe_timeout_seconds", &C::probe_timeout_seconds),
      member("probe_retry_seconds", &C::probe_retry_seconds),
      {"device_mode", read_device_mode},
      member("amd_kfd_path", &C::amd_kfd_path),
      member("amd_kfd_in_container", &C::amd_kfd_in_container),
      member("max_body_bytes", &C::max_body_bytes),
      member("max_upload_bytes", &C::max_upload_bytes),
      member("request_timeout_seconds", &C::request_timeout_seconds),
      member("idle_timeout_seconds", &C::idle_timeout_seconds),
      member("worker_threads", &C::worker_threads),
      member("stop_timeout_seconds", &C::stop_timeout_seconds),
      member("reconcile_interval_seconds", &C::reconcile_interval_seconds),
      member("lease_grace_seconds", &C::lease_grace_seconds),
      member("idle_check_interval_seconds", &C::idle_check_interval_seconds),
      member("ssh_user", &C::ssh_user),
      {"dashboard", read_dashboard},
      {"gpus", read_gpus},
      {"users", read_users},
      {"hosts", read_hosts},
      member("host_check_seconds", &C::host_check_seconds),
      member("host_answer_seconds", &C::host_answer_seconds),
      member("restart_on_host_return", &C::restart_on_host_return)};
  return keys;
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
  const long long p = parse_int(port).value_or(-1);
  if (p < 0 || p > 65535 || host.empty())
    return Error{Code::kInvalidArgument, "--listen: bad address '" + text + "'"};
  config.listen_host = host;
  config.listen_port = static_cast<uint16_t>(p);
  return ok_status();
}

Result<ServiceConfig> config_from_json(const std::string& text) {
  auto parsed = parse_json(text, "config file");
  if (!parsed) return parsed.error();
  if (!parsed->is_object()) return bad("top level must be an object");
  ServiceConfig c;
  if (auto st = read_keys(*parsed, config_keys(), c, "config"); !st) return st.error();
  return c;
}

Result<ServiceConfig> load_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return Error{Code::kInvalidArgument, "cannot read config file " + path};
  return config_from_json(*text);
}

bool valid_host_name(const std::string& n) {
  if (n.empty() || n.size() > 32 || n.front() == '-') return false;
  return std::all_of(n.begin(), n.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
  });
}

namespace {

// TLS files present and paired; plain HTTP only on loopback unless insecure_http.
Status validate_transport(const ServiceConfig& c) {
  if (c.tls_cert.empty() != c.tls_key.empty())
    return bad(std::string(c.tls_cert.empty() ? "tls_key" : "tls_cert") +
               " given alone: give tls_cert and tls_key together");
  for (const auto& [field, path] :
       {std::pair<std::string, std::string>{"tls_cert", c.tls_cert}, {"tls_key", c.tls_key}}) {
    std::error_code ec;
    if (!path.empty() && !std::filesystem::is_regular_file(path, ec))
      return bad(field + ": no such file " + path);
  }
  if (c.tls_cert.empty() && !c.insecure_http && !is_loopback_host(c.listen_host))
    return Error{Code::kInvalidArgument,
                 "refusing to serve plain HTTP on " + c.listen_host +
                     ": tokens and passwords would cross the network in clear text",
                 "give --tls_cert and --tls_key (HTTPS), or --insecure_http on a network you "
                 "trust"};
  if (c.auth_failures_before_throttle < 1) return bad("auth_failures_before_throttle must be >= 1");
  return ok_status();
}

// One host: a URL the engine client understands, and for tcp mutual TLS (or insecure: true)
// with files that parse, match and are valid now (tls_files.h).
Status validate_host(const HostConfig& h, const std::string& at) {
  if (!valid_host_name(h.name))
    return bad_host(at + ".name: '" + h.name + "' is not 1-32 of a-z, 0-9 and '-'");
  const auto url = parse_host_url(h.url);
  if (!url)
    return bad_host(at + ".url: '" + h.url +
                    "' is neither unix:///PATH nor tcp://HOST:PORT (tcp://gpu2.lab:2376)");
  const bool tcp = url->tcp;
  const bool tls = !h.tls_ca.empty() || !h.tls_cert.empty() || !h.tls_key.empty();
  if (tcp && !h.insecure) {
    for (const auto& [field, path] : {std::pair<std::string, std::string>{"tls_ca", h.tls_ca},
                                      {"tls_cert", h.tls_cert},
                                      {"tls_key", h.tls_key}}) {
      if (path.empty())
        return bad_host(
            at + "." + field + " is missing: a tcp host needs tls_ca, tls_cert and " +
            "tls_key (Docker's mutual TLS), or \"insecure\": true on a network you trust");
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec))
        return bad_host(at + "." + field + ": no such file " + path);
    }
  }
  if (h.probe_root.empty() || h.probe_root.front() != '/')
    return bad_host(at + ".probe_root: '" + h.probe_root + "' is not an absolute path on the host");
  if (h.probe_image.find_first_of(" \t\n") != std::string::npos)
    return bad_host(at + ".probe_image: '" + h.probe_image + "' is not an image reference");
  if (h.insecure && tls) return bad_host(at + ": insecure with tls_* files; give one or the other");
  if (!tcp && (tls || h.insecure))
    return bad_host(at + ": tls_* and insecure are for tcp:// hosts");
  if (!h.tls_client_ca.empty() && !tls)
    return bad_host(at + ".tls_client_ca: given without tls_ca, tls_cert and tls_key");
  if (tcp && !h.insecure)
    return check_host_tls_files({h.tls_ca, h.tls_cert, h.tls_key, h.tls_client_ca}, at);
  return ok_status();
}

// Names unique, each host valid, every GPU uuid once in the whole lab.
Status validate_hosts(const ServiceConfig& c) {
  if (c.hosts.empty()) return ok_status();
  if (!c.docker_host.empty() || !c.gpus.empty())
    return bad_host("docker_host and gpus go inside each of hosts[] when hosts is given");
  if (c.host_check_seconds < 1 || c.host_check_seconds > 60)
    return bad_host("host_check_seconds must be 1..60");
  if (c.host_answer_seconds < 1 || c.host_answer_seconds > 60)
    return bad_host("host_answer_seconds must be 1..60");
  std::set<std::string> names, uuids;
  for (size_t i = 0; i < c.hosts.size(); ++i) {
    const auto& h = c.hosts[i];
    std::string at = "hosts[" + std::to_string(i) + "]";
    if (auto st = validate_host(h, at); !st) return st;
    if (!names.insert(h.name).second)
      return bad_host(at + ".name: host '" + h.name + "' given twice");
    std::set<int> indices;
    for (const auto& g : h.gpus) {
      if (!uuids.insert(g.uuid).second)
        return bad_host(at + ".gpus: GPU uuid " + g.uuid + " declared twice in the lab");
      if (!indices.insert(g.index).second)
        return bad_host(at + ".gpus: GPU index " + std::to_string(g.index) + " declared twice");
    }
  }
  return ok_status();
}

}  // namespace

std::optional<HostUrl> parse_host_url(std::string_view url) {
  HostUrl u;
  if (starts_with(url, "unix:///")) return u;
  if (!starts_with(url, "tcp://")) return std::nullopt;
  const std::string_view rest = url.substr(6);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const auto port = parse_int(std::string(rest.substr(colon + 1)));
  if (!port || *port < 1 || *port > 65535) return std::nullopt;
  u.tcp = true;
  u.host = std::string(rest.substr(0, colon));
  u.port = static_cast<int>(*port);
  return u;
}

std::vector<HostConfig> lab_hosts(const ServiceConfig& c) {
  if (!c.hosts.empty()) return c.hosts;
  HostConfig h;
  h.name = "local";
  h.url = c.docker_host;  // empty: $DOCKER_HOST or the local socket, as before hosts existed
  h.gpus = c.gpus;
  for (auto& g : h.gpus) g.host = h.name;
  return {h};
}

Status validate_config(const ServiceConfig& c) {
  if (auto st = validate_transport(c); !st) return st;
  if (auto st = validate_hosts(c); !st) return st;
  if (c.ssh_port_base < 1 || c.ssh_port_base + c.ssh_port_step > 65535 || c.ssh_port_step < 1)
    return bad("ssh_port_base/ssh_port_step give no SSH port in 1..65535");
  if (c.allocation_policy != "pack" && c.allocation_policy != "spread")
    return bad("allocation_policy must be \"pack\" or \"spread\"");
  if (c.worker_threads < 1 || c.worker_threads > 1024) return bad("worker_threads out of range");
  if (c.idle_check_interval_seconds < 1 || c.idle_check_interval_seconds > 86400)
    return bad("idle_check_interval_seconds must be 1..86400");
  if (c.probe_timeout_seconds < 1 || c.probe_timeout_seconds > 600)
    return bad("probe_timeout_seconds must be 1..600");
  if (c.probe_retry_seconds < 1 || c.probe_retry_seconds > 86400)
    return bad("probe_retry_seconds must be 1..86400");
  if (c.probe_image.find_first_of(" \t\n") != std::string::npos)
    return bad("probe_image: '" + c.probe_image + "' is not an image reference");
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
