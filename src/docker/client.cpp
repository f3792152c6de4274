// Client construction and API version negotiation, and the engine-level calls (ping, version,
// info).
#include "docker/client.h"

#include "core/strings.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

using detail::call;
using detail::call_json;
using detail::num;
using detail::str;

namespace {

// "1.41" -> 1041, for ordering; 0 when malformed.
int api_rank(const std::string& v) {
  auto parts = split(v, '.');
  if (parts.size() != 2) return 0;
  const auto major = parse_int(parts[0]), minor = parse_int(parts[1]);
  if (!major || !minor || *major < 0 || *major > 1000 || *minor < 0 || *minor > 999) return 0;
  return static_cast<int>(*major * 1000 + *minor);
}

}  // namespace

Client::Client(std::shared_ptr<HttpTransport> transport, std::string api_version)
    : transport_(std::move(transport)), api_version_(std::move(api_version)) {
  GPULAB_ASSERT(transport_ != nullptr, "Client needs a transport");
}

Result<Client> Client::connect(const Endpoint& endpoint) {
  return connect(std::shared_ptr<HttpTransport>(make_curl_transport(endpoint)));
}

Result<Client> Client::from_env() {
  auto ep = Endpoint::from_env();
  if (!ep.ok()) return ep.error();
  return connect(*ep);
}

Result<Client> Client::connect(std::shared_ptr<HttpTransport> transport) {
  HttpRequest req;
  req.target = "/version";  // unversioned: every engine answers it
  req.timeout = std::chrono::seconds(15);
  auto j = call_json(*transport, req, "ask the Docker engine its version");
  if (!j.ok()) return j.error();
  std::string server = str(*j, "ApiVersion");
  std::string min_server = str(*j, "MinAPIVersion", "1.12");
  if (api_rank(server) == 0)
    return Error(Code::kUnavailable,
                 "the Docker engine at " + transport->describe() + " reported no API version",
                 "is that a Docker engine?");
  if (api_rank(kMaxApiVersion) < api_rank(min_server))
    return Error(Code::kUnsupported,
                 "the Docker engine needs API " + min_server + " or newer; gpulab speaks up to " +
                     kMaxApiVersion,
                 "use an older engine or a newer gpulab");
  std::string use = api_rank(server) < api_rank(kMaxApiVersion) ? server : kMaxApiVersion;
  return Client(std::move(transport), use);
}

std::string Client::describe() const {
  return transport_->describe() + " (API " + api_version_ + ")";
}

std::string Client::path(const std::string& p) const {
  return "/v" + api_version_ + p;
}

Status Client::ping() const {
  HttpRequest req;
  req.target = "/_ping";
  req.timeout = std::chrono::seconds(10);
  auto r = call(*transport_, req, "ping the Docker engine");
  if (!r.ok()) return r.error();
  return ok_status();
}

Result<VersionInfo> Client::version() const {
  HttpRequest req;
  req.target = path("/version");
  req.timeout = std::chrono::seconds(15);
  auto j = call_json(*transport_, req, "read the Docker engine version");
  if (!j.ok()) return j.error();
  VersionInfo v;
  v.version = str(*j, "Version");
  v.api_version = str(*j, "ApiVersion");
  v.min_api_version = str(*j, "MinAPIVersion");
  v.os = str(*j, "Os");
  v.arch = str(*j, "Arch");
  v.kernel_version = str(*j, "KernelVersion");
  return v;
}

Result<EngineInfo> Client::info() const {
  HttpRequest req;
  req.target = path("/info");
  req.timeout = std::chrono::seconds(30);
  auto j = call_json(*transport_, req, "read the Docker engine info");
  if (!j.ok()) return j.error();
  EngineInfo i;
  i.id = str(*j, "ID");
  i.name = str(*j, "Name");
  i.server_version = str(*j, "ServerVersion");
  i.storage_driver = str(*j, "Driver");
  i.cgroup_driver = str(*j, "CgroupDriver");
  i.cgroup_version = str(*j, "CgroupVersion");
  i.docker_root_dir = str(*j, "DockerRootDir");
  i.operating_system = str(*j, "OperatingSystem");
  i.kernel_version = str(*j, "KernelVersion");
  i.containers = static_cast<int>(num(*j, "Containers"));
  i.containers_running = static_cast<int>(num(*j, "ContainersRunning"));
  i.images = static_cast<int>(num(*j, "Images"));
  i.ncpu = static_cast<int>(num(*j, "NCPU"));
  i.mem_total_bytes = num(*j, "MemTotal");
  const Json& rt = detail::child(*j, "Runtimes");
  if (rt.is_object())
    for (auto it = rt.begin(); it != rt.end(); ++it) i.runtimes.push_back(it.key());
  i.raw = std::move(*j);
  return i;
}

}  // namespace gpulab::docker
