// Endpoint parsing: DOCKER_HOST-style strings and the DOCKER_TLS_VERIFY / DOCKER_CERT_PATH
// environment, as the docker CLI reads them.
#include <cstdlib>
#include <filesystem>

#include "core/strings.h"
#include "docker/http_transport.h"

namespace gpulab::docker {

namespace {

std::string env_or(const char* name, const std::string& fallback = {}) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

}  // namespace

Result<Endpoint> Endpoint::parse(std::string_view docker_host) {
  std::string s = trim(docker_host);
  Endpoint ep;
  if (s.empty()) return ep;
  if (starts_with(s, "/")) {
    ep.socket_path = s;
    return ep;
  }
  if (starts_with(s, "unix://")) {
    ep.socket_path = s.substr(7);
    if (ep.socket_path.empty() || ep.socket_path[0] != '/')
      return Error(Code::kInvalidArgument, "bad Docker host '" + s + "'",
                   "write a unix socket as unix:///path/to/docker.sock");
    return ep;
  }
  bool https = starts_with(s, "https://");
  if (starts_with(s, "tcp://") || https || starts_with(s, "http://")) {
    std::string rest = s.substr(s.find("://") + 3);
    if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
    ep.kind = Kind::kTcp;
    ep.tls = https;
    auto colon = rest.rfind(':');
    if (colon == std::string::npos || rest.find(']', colon) != std::string::npos) {
      ep.host = rest;
      ep.port = https ? 2376 : 2375;
    } else {
      ep.host = rest.substr(0, colon);
      const auto port = parse_int(std::string_view(rest).substr(colon + 1));
      if (!port || *port < 1 || *port > 65535)
        return Error(Code::kInvalidArgument, "bad port in Docker host '" + s + "'",
                     "write tcp://host:port with a port 1-65535");
      ep.port = static_cast<int>(*port);
    }
    if (ep.host.empty())
      return Error(Code::kInvalidArgument, "no host in Docker host '" + s + "'",
                   "write tcp://host:port");
    return ep;
  }
  return Error(Code::kInvalidArgument, "unsupported Docker host '" + s + "'",
               "use unix:///path/docker.sock or tcp://host:port");
}

Result<Endpoint> Endpoint::from_env() {
  auto ep = parse(env_or("DOCKER_HOST"));
  if (!ep.ok() || ep->kind != Kind::kTcp) return ep;
  // TLS as the docker CLI: DOCKER_TLS_VERIFY set (any non-empty value) means verify against
  // ca.pem; certificates come from DOCKER_CERT_PATH (default ~/.docker).
  std::string cert_dir = env_or("DOCKER_CERT_PATH", env_or("HOME", "/root") + "/.docker");
  bool verify = !env_or("DOCKER_TLS_VERIFY").empty();
  bool have_certs = std::filesystem::exists(cert_dir + "/cert.pem");
  if (verify || (!env_or("DOCKER_CERT_PATH").empty() && have_certs) || ep->port == 2376) {
    ep->tls = true;
    ep->tls_verify = verify;
    if (std::filesystem::exists(cert_dir + "/ca.pem")) ep->ca_file = cert_dir + "/ca.pem";
    if (have_certs) {
      ep->cert_file = cert_dir + "/cert.pem";
      ep->key_file = cert_dir + "/key.pem";
    }
  }
  return ep;
}

std::string Endpoint::to_string() const {
  if (kind == Kind::kUnix) return "unix://" + socket_path;
  return "tcp://" + host + ":" + std::to_string(port);
}

}  // namespace gpulab::docker
