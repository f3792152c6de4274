// HTTP calls of gpulab ddp to gpulab serve (leases), over the Docker client's curl transport.
#include "builder/service_lease.h"

#include <string_view>

#include "core/strings.h"

namespace gpulab::builder {

namespace {

constexpr const char* kApi = "/api/v1/gpu-docker";

Code code_for(const std::string& api_code, long status) {
  if (api_code == "GPU_ALLOCATION_FAILED" || api_code == "PORT_EXHAUSTED")
    return Code::kResourceExhausted;
  if (api_code == "UNAUTHORIZED" || status == 401) return Code::kUnauthenticated;
  if (api_code == "FORBIDDEN" || status == 403) return Code::kPermissionDenied;
  if (api_code == "INVALID_REQUEST") return Code::kInvalidArgument;
  if (api_code == "NAME_CONFLICT") return Code::kAlreadyExists;
  if (api_code == "PORT_CONFLICT" || api_code == "STATE_CONFLICT") return Code::kConflict;
  if (api_code == "ENGINE_UNAVAILABLE") return Code::kUnavailable;
  if (status == 404) return Code::kNotFound;
  return Code::kInternal;
}

}  // namespace

Result<ServiceClient> ServiceClient::open(const std::string& url, const std::string& token) {
  docker::Endpoint ep;
  ep.kind = docker::Endpoint::Kind::kTcp;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
    ep.tls = true;
  } else {
    return Error(Code::kInvalidArgument, "service URL must start with http:// or https://: " + url);
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  auto colon = rest.rfind(':');
  ep.host = rest.substr(0, colon);
  ep.port = ep.tls ? 443 : 80;
  if (colon != std::string::npos) {
    const auto port = parse_int(std::string_view(rest).substr(colon + 1));
    if (!port || *port < 0 || *port > 65535)
      return Error(Code::kInvalidArgument, "bad port in service URL " + url);
    ep.port = static_cast<int>(*port);
  }
  if (ep.host.empty() || ep.host.find('/') != std::string::npos || ep.port < 1 || ep.port > 65535)
    return Error(Code::kInvalidArgument, "service URL must be http(s)://HOST:PORT, got " + url);
  std::shared_ptr<docker::HttpTransport> t = docker::make_curl_transport(ep);
  return ServiceClient(url, token, std::move(t));
}

Result<Json> ServiceClient::call(const std::string& method, const std::string& path,
                                 const Json* body, int timeout_ms) const {
  docker::HttpRequest r;
  r.method = method;
  r.target = path;
  r.connect_timeout = std::chrono::milliseconds(std::min(timeout_ms, 3000));
  r.timeout = std::chrono::milliseconds(timeout_ms);
  if (!token_.empty()) r.headers.push_back({"Authorization", "Bearer " + token_});
  if (body) {
    r.headers.push_back({"Content-Type", "application/json"});
    r.body = body->dump();
  }
  auto resp = transport_->send(r);
  if (!resp) {
    // The transport words its errors for the Docker engine; keep only curl's reason.
    const std::string& m = resp.error().message;
    auto cut = m.rfind(": ");
    return Error(resp.error().code == Code::kTimeout ? Code::kTimeout : Code::kUnavailable,
                 "gpulab serve at " + url_ + " is not answering (" +
                     (cut == std::string::npos ? m : m.substr(cut + 2)) + ")",
                 "start it, or pass --no-service to allocate directly on the engine");
  }
  auto j = parse_json(resp->body, "the service's answer");
  if (!j || !j->is_object())
    return Error(Code::kUnavailable, "no gpulab serve at " + url_ + " (HTTP " +
                                         std::to_string(resp->status) + ", not its JSON answer)");
  if (!j->value("success", false)) {
    std::string api_code = j->value("error_code", std::string());
    return Error(code_for(api_code, resp->status),
                 "gpulab serve: " + j->value("message", std::string("request failed")) +
                     (api_code.empty() ? "" : " (" + api_code + ")"),
                 j->value("hint", std::string()));
  }
  return (*j)["data"];
}

Result<ServiceHealth> ServiceClient::health() const {
  auto d = call("GET", "/healthz", nullptr, 2000);
  if (!d) {
    // /healthz answers success=false when its engine is down: still a gpulab serve.
    return d.error();
  }
  ServiceHealth h;
  h.engine = d->value("engine", false);
  h.gpus = d->value("gpus", 0);
  h.engine_id = d->value("engine_id", std::string());
  if (d->contains("hosts") && (*d)["hosts"].is_array())
    for (const auto& x : (*d)["hosts"])
      if (x.is_object())
        h.hosts.push_back({x.value("name", std::string()), x.value("engine_id", std::string()),
                           x.value("gpus", 0)});
  return h;
}

std::vector<std::string> ServiceHealth::hosts_of(const std::string& id) const {
  std::vector<std::string> out;
  if (id.empty()) return out;
  for (const auto& x : hosts)
    if (x.engine_id == id) out.push_back(x.name);
  if (hosts.empty() && engine_id == id) out.push_back("");
  return out;
}

Result<docker::GpuLease> ServiceClient::lease(const std::string& name, int gpu_count, bool ssh_port,
                                              const std::string& host) const {
  Json req = {{"name", name}, {"gpu_count", gpu_count}, {"ssh_port", ssh_port}};
  if (!host.empty()) req["host"] = host;
  auto d = call("POST", std::string(kApi) + "/leases", &req, 30000);
  if (!d) return d.error();
  const std::string unexpected = "unexpected lease answer from gpulab serve: ";
  auto l = docker::GpuLease::from_json(*d);
  if (!l) return Error(Code::kInternal, unexpected + l.error().message);
  if (!l->attachment) return Error(Code::kInternal, unexpected + "no attachment");
  return l;
}

Status ServiceClient::release(const std::string& name) const {
  Json req = {{"name", name}};
  auto d = call("POST", std::string(kApi) + "/leases/release", &req, 30000);
  if (!d) return d.error();
  return ok_status();
}

}  // namespace gpulab::builder
