// The engine container of a booked row (engine_container.h).
#include "service/ops/containers/engine_container.h"

#include "core/strings.h"
#include "service/store/book_id.h"

namespace gpulab::service {

LabContainer engine_spec(Service& s, const std::string& name, const std::string& owner,
                         const ContainerSpec& spec, const std::vector<GpuSlot>& gpus, int ssh_port,
                         std::int64_t intent) {
  LabContainer cs;
  cs.name = name;
  cs.image = spec.image;
  cs.env = spec.env;
  // The lab image's entrypoint applies the key (the password reaches it apart: run_container).
  cs.env.push_back("GPULAB_SSH_PUBKEY=" + spec.ssh_public_key);
  cs.env.push_back("GPULAB_CONTAINER_NAME=" + name);
  std::vector<std::string> uuids;
  for (const auto& g : gpus) uuids.push_back(g.uuid);
  cs.labels = {{"gpulab.managed", "true"},
               {"gpulab.owner", owner},
               {"gpulab.gpus", join(uuids, ",")},
               {"gpulab.intent", std::to_string(intent)},
               {"gpulab.ssh_port", std::to_string(ssh_port)},
               {kBookLabel, book_id(*s.store)}};
  cs.ssh_port = ssh_port;
  cs.ports = spec.ports;
  if (spec.cpus.set()) cs.nano_cpus = spec.cpus.nano_cpus;
  if (spec.memory.set()) cs.memory_bytes = spec.memory.bytes;
  if (spec.shm_size.set()) cs.shm_size_bytes = spec.shm_size.bytes;
  cs.pids_limit = spec.pids_limit;
  cs.gpus = gpus;
  return cs;
}

std::string engine_create_start(Service& s, const std::string& host, const LabContainer& cs,
                                const std::string& password) {
  auto id = s.engine_on(host).run_container(cs, password);
  if (!id) {
    Error e = id.error();
    if (s.hosts.size() > 1) e.message = "host '" + host + "': " + e.message;  // which one
    if (e.message.find("could not select device driver") != std::string::npos)
      e.hint = "host '" + host +
               "' has no NVIDIA container runtime: install the NVIDIA Container Toolkit there, or "
               "set \"device_mode\": \"none\" to book GPUs without attaching devices "
               "(docs/engines.md#many-hosts)";
    throw_engine_error(e);
  }
  return *id;
}

std::string create_engine_container(Service& s, const ContainerRecord& c) {
  std::vector<GpuSlot> gpus;
  const auto inventory = s.engine_of(c).gpus();  // its host's GPUs: it is made there
  for (const auto& g : c.gpus)
    if (const GpuSlot* slot = inventory->find(g.uuid)) gpus.push_back(*slot);
  auto cs = engine_spec(s, c.name, c.owner, c.spec, gpus, c.ssh_port, c.id);
  return engine_create_start(s, c.host, cs);
}

}  // namespace gpulab::service
