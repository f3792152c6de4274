// Parsing a container spec from a request or a stored record, and its stored JSON form.
#include "service/domain/container_spec.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "service/base/api_error.h"
#include "service/domain/validation.h"

namespace gpulab::service {

namespace {

CpuLimit cpu_limit(const Json& value) {
  return CpuLimit{as_text(value), parse_cpus(value)};
}

SizeLimit size_limit(const Json& value, const std::string& field) {
  return SizeLimit{as_text(value), parse_size(value, field)};
}

// Shown to users only, but read from an uploaded backup's manifest: user input.
bool image_reference_like(const std::string& image) {
  if (image.size() > 255) return false;
  return std::all_of(image.begin(), image.end(), [](unsigned char ch) {
    return std::isalnum(ch) || (ch != 0 && std::strchr("._/:@-", ch) != nullptr);
  });
}

}  // namespace

Json ContainerSpec::to_json() const {
  Json j = Json::object();
  j["image"] = image;
  if (!origin_image.empty()) j["origin_image"] = origin_image;
  j["gpu_count"] = gpu_count;
  j["cpus"] = cpus.text;
  j["memory"] = memory.text;
  j["shm_size"] = shm_size.text;
  j["pids_limit"] = pids_limit;
  Json ports_j = Json::array();
  for (const auto& p : ports)
    ports_j.push_back({{"host_port", p.host_port},
                       {"container_port", p.container_port},
                       {"protocol", p.protocol}});
  j["ports"] = ports_j;
  j["ssh_public_key"] = ssh_public_key;
  j["env"] = env;
  return j;
}

void ContainerSpec::run_from(const std::string& internal) {
  if (origin_image.empty()) origin_image = image;
  image = internal;
}

ContainerSpec ContainerSpec::from_json(const Json& j) {
  ContainerSpec s;
  s.image = j.value("image", std::string());
  s.origin_image = j.value("origin_image", std::string());
  if (!s.origin_image.empty() && !image_reference_like(s.origin_image))
    throw ApiError(ApiCode::kInvalidRequest,
                   "origin_image is not an image reference (letters, digits and ._/:@- only, at "
                   "most 255 characters)",
                   "Upload a backup gpulab wrote, or remove origin_image from its manifest");
  s.gpu_count = j.value("gpu_count", 0);
  if (auto t = j.value("cpus", std::string()); !t.empty()) s.cpus = cpu_limit(Json(t));
  if (auto t = j.value("memory", std::string()); !t.empty())
    s.memory = size_limit(Json(t), "memory");
  if (auto t = j.value("shm_size", std::string()); !t.empty())
    s.shm_size = size_limit(Json(t), "shm_size");
  s.pids_limit = j.value("pids_limit", std::int64_t{0});
  if (j.contains("ports")) {
    // Through the request's parser (ranges, protocol, a host port once): one rule for both.
    Json given = Json::array();
    for (const auto& p : j["ports"])
      given.push_back(PortMapping{p.value("host_port", 0), p.value("container_port", 0),
                                  p.value("protocol", std::string("tcp"))}
                          .to_string());
    s.ports = parse_ports(given);
  }
  s.ssh_public_key = j.value("ssh_public_key", std::string());
  // Reserved names (CUDA_VISIBLE_DEVICES, GPULAB_...) are refused here too: an uploaded backup's
  // manifest must not set what the service sets for GPU isolation.
  if (j.contains("env")) s.env = parse_env(j["env"]);
  return s;
}

ContainerSpec apply_spec_fields(const Json& req, ContainerSpec base) {
  if (req.contains("gpu_count")) {
    int n = req["gpu_count"].get<int>();
    if (n < 0 || n > 64) throw ApiError(ApiCode::kInvalidRequest, "gpu_count must be 0..64");
    base.gpu_count = n;
  }
  if (req.contains("port")) base.ports = parse_ports(req["port"]);
  if (req.contains("cpus")) base.cpus = cpu_limit(req["cpus"]);
  if (req.contains("memory")) base.memory = size_limit(req["memory"], "memory");
  if (req.contains("shm_size")) base.shm_size = size_limit(req["shm_size"], "shm_size");
  if (req.contains("pids_limit")) {
    auto n = req["pids_limit"].get<std::int64_t>();
    if (n < 16 || n > 4194304)
      throw ApiError(ApiCode::kInvalidRequest, "pids_limit must be 16..4194304");
    base.pids_limit = n;
  }
  if (req.contains("ssh_public_key")) {
    check_ssh_public_key(req["ssh_public_key"].get<std::string>());
    base.ssh_public_key = req["ssh_public_key"].get<std::string>();
  }
  if (req.contains("env")) base.env = parse_env(req["env"]);
  return base;
}

}  // namespace gpulab::service
