// JSON round trip of a container's requested settings, stored with it and in backup manifests.
#include "service/records.h"

namespace gpulab::service {

std::string PortMapping::to_string() const {
  std::string s = std::to_string(host_port) + ":" + std::to_string(container_port);
  if (protocol != "tcp") s += "/" + protocol;
  return s;
}

Json ContainerSpec::to_json() const {
  Json j = Json::object();
  j["image"] = image;
  j["gpu_count"] = gpu_count;
  j["cpus"] = cpus;
  j["memory"] = memory;
  j["shm_size"] = shm_size;
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

ContainerSpec ContainerSpec::from_json(const Json& j) {
  ContainerSpec s;
  s.image = j.value("image", std::string());
  s.gpu_count = j.value("gpu_count", 0);
  s.cpus = j.value("cpus", std::string());
  s.memory = j.value("memory", std::string());
  s.shm_size = j.value("shm_size", std::string());
  s.pids_limit = j.value("pids_limit", std::int64_t{0});
  if (j.contains("ports")) {
    for (const auto& p : j["ports"]) {
      s.ports.push_back(PortMapping{p.value("host_port", 0), p.value("container_port", 0),
                                    p.value("protocol", std::string("tcp"))});
    }
  }
  s.ssh_public_key = j.value("ssh_public_key", std::string());
  s.env = j.value("env", std::vector<std::string>{});
  return s;
}

std::vector<int> ContainerRecord::gpu_indices() const {
  std::vector<int> v;
  for (const auto& g : gpus) v.push_back(g.index);
  return v;
}

std::vector<std::string> ContainerRecord::gpu_uuids() const {
  std::vector<std::string> v;
  for (const auto& g : gpus) v.push_back(g.uuid);
  return v;
}

}  // namespace gpulab::service
