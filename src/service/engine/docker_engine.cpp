// The Docker adapter's engine and container calls: lab containers in, engine containers out.
#include "service/engine/docker_engine.h"

#include <utility>

#include "service/engine/docker_attachment.h"
#include "service/engine/docker_bounded_transport.h"

namespace gpulab::service {

namespace {

EngineContainer from_summary(docker::ContainerSummary c) {
  return EngineContainer{std::move(c.id),
                         std::move(c.name),
                         std::move(c.image),
                         std::move(c.state),
                         std::move(c.status),
                         std::move(c.labels),
                         {}};
}

}  // namespace

DockerEngine::DockerEngine(docker::Client client, ServiceConfig config, ServiceInventory inventory,
                           std::string bind_ip)
    : client_(client),
      lab_(std::move(client)),
      config_(std::move(config)),
      inventory_(std::make_shared<const ServiceInventory>(std::move(inventory))),
      bind_ip_(std::move(bind_ip)) {}

std::string DockerEngine::describe() const {
  return client_.describe();
}

Status DockerEngine::ping() const {
  return client_.ping();
}

void DockerEngine::abandon_stalled_calls(std::chrono::milliseconds idle) const {
  client_.transport().abandon_stalled_calls(idle);
}

Result<std::string> DockerEngine::engine_id() const {
  {
    std::lock_guard<std::mutex> g(id_mu_);
    if (!id_.empty()) return id_;
  }
  auto id = lab_.engine_id();
  if (!id) return id.error();
  std::lock_guard<std::mutex> g(id_mu_);
  id_ = *id;
  return id_;
}

std::optional<bool> DockerEngine::live_restore() const {
  auto info = client_.info();  // asked afresh: a dockerd restart may have changed it
  if (!info || !info->raw.is_object()) return std::nullopt;
  return info->raw.value("LiveRestoreEnabled", false);
}

std::string DockerEngine::unavailable_hint() const {
  return docker::kStartEngineHint;
}

std::shared_ptr<const ServiceInventory> DockerEngine::gpus() const {
  std::lock_guard<std::mutex> g(inventory_mu_);
  return inventory_;
}

std::vector<GpuSample> DockerEngine::sample_gpus() const {
  // The engine's socket is this host's: its GPUs are sampled here.
  return service::sample_gpus(*gpus());
}

docker::CreateSpec DockerEngine::create_spec(const LabContainer& spec) const {
  docker::CreateSpec cs;
  cs.name = spec.name;
  cs.image = spec.image;
  cs.hostname = spec.name;
  GpuAttachment att = attachment_for(spec.gpus, config_);
  cs.env = spec.env;
  for (auto& e : att.env) cs.env.push_back(e);
  cs.labels = spec.labels;
  cs.ports.push_back(docker::PortBinding{22, "tcp", spec.ssh_port, bind_ip_});
  for (const auto& p : spec.ports)
    cs.ports.push_back(docker::PortBinding{p.container_port, p.protocol, p.host_port, bind_ip_});
  cs.nano_cpus = spec.nano_cpus;
  cs.memory_bytes = spec.memory_bytes;
  cs.shm_size_bytes = spec.shm_size_bytes;
  cs.pids_limit = spec.pids_limit;
  cs.gpus = att.requests;
  cs.devices = att.devices;
  cs.group_add = att.group_add;
  return cs;
}

// The sequence (create, password file, start, removed on failure) is the one gpulab ddp uses too.
Result<std::string> DockerEngine::create_container(const LabContainer& spec,
                                                   const std::string& ssh_password) const {
  return lab_.make_lab_container(create_spec(spec), ssh_password, /*start=*/false);
}

Result<std::string> DockerEngine::run_container(const LabContainer& spec,
                                                const std::string& ssh_password) const {
  return lab_.make_lab_container(create_spec(spec), ssh_password, /*start=*/true);
}

Status DockerEngine::start_container(const std::string& ref) const {
  return client_.start_container(ref);
}

Status DockerEngine::stop_container(const std::string& ref, int timeout_s) const {
  return client_.stop_container(ref, timeout_s);
}

Status DockerEngine::restart_container(const std::string& ref, int timeout_s) const {
  return client_.restart_container(ref, timeout_s);
}

Status DockerEngine::remove_container(const std::string& ref) const {
  // By id, once the reference is known to mean exactly that container (inspect_container).
  auto info = inspect_container(ref);
  if (!info) return info.error();
  return client_.remove_container(info->id, true);
}

Result<EngineContainer> DockerEngine::inspect_container(const std::string& ref) const {
  auto info = client_.inspect_container(ref);
  if (!info) return info.error();
  // Docker falls back to an id prefix when no container has that name: "c4" would find another
  // container whose id starts with c4. A reference is our container's name or its full id.
  if (info->name != ref && info->id != ref)
    return Error(Code::kNotFound, "no container named " + ref);
  EngineContainer c{info->id, info->name, info->image, info->status, "", info->labels, {}};
  // The service makes no mounts; an image's VOLUME still gets an anonymous volume.
  if (auto m = info->raw.find("Mounts"); m != info->raw.end() && m->is_array())
    for (const auto& mount : *m)
      if (mount.value("Type", std::string()) == "volume")
        c.volumes.push_back(mount.value("Destination", std::string()));
  return c;
}

Result<std::vector<EngineContainer>> DockerEngine::list_containers(
    const std::vector<std::string>& labels) const {
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = labels;
  auto list = client_.list_containers(lo);
  if (!list) return list.error();
  std::vector<EngineContainer> out;
  for (auto& c : *list) out.push_back(from_summary(std::move(c)));
  return out;
}

Status DockerEngine::update_container(const std::string& ref, const ResourceChange& change) const {
  docker::ResourceUpdate u;
  u.nano_cpus = change.nano_cpus;
  u.memory_bytes = change.memory_bytes;
  u.memory_swap_bytes = change.memory_swap_bytes;
  u.pids_limit = change.pids_limit;
  return client_.update_container(ref, u);
}

Result<LogText> DockerEngine::logs(const std::string& ref, const LogQuery& query) const {
  docker::LogOptions lo;
  lo.tail = query.tail;
  auto out = client_.logs(ref, lo);
  if (!out) return out.error();
  return LogText{std::move(out->out), std::move(out->err)};
}

Result<ContainerUsage> DockerEngine::usage(const std::string& ref) const {
  auto st = client_.stats(ref);
  if (!st) return st.error();
  ContainerUsage u;
  u.cpu_percent = st->cpu_percent;
  u.online_cpus = st->online_cpus;
  u.memory_usage_bytes = st->memory_usage_bytes;
  u.memory_limit_bytes = st->memory_limit_bytes;
  u.memory_percent = st->memory_percent;
  u.net_rx_bytes = st->net_rx_bytes;
  u.net_tx_bytes = st->net_tx_bytes;
  u.block_read_bytes = st->block_read_bytes;
  u.block_write_bytes = st->block_write_bytes;
  u.pids = st->pids;
  return u;
}

Result<ExecOutput> DockerEngine::exec(const std::string& ref,
                                      const std::vector<std::string>& cmd) const {
  auto ex = client_.exec(ref, cmd);
  if (!ex) return ex.error();
  return ExecOutput{ex->exit_code, std::move(ex->out), std::move(ex->err)};
}

Result<std::unique_ptr<Engine>> open_host_engine(const ServiceConfig& config,
                                                 const HostConfig& host, ServiceInventory inventory,
                                                 std::function<void(const std::string&)> on_hung) {
  Result<docker::Endpoint> ep =
      host.url.empty() ? docker::Endpoint::from_env() : docker::Endpoint::parse(host.url);
  if (!ep) return ep.error();
  if (ep->kind == docker::Endpoint::Kind::kTcp && !host.url.empty()) {
    // Mutual TLS as the config says, the peer and its name verified; never plain TCP unless
    // the host is marked insecure (validate_config refuses the rest).
    ep->tls = !host.insecure;
    ep->tls_verify = true;
    ep->ca_file = host.tls_ca;
    ep->cert_file = host.tls_cert;
    ep->key_file = host.tls_key;
  }
  // Every wait on this engine bounded by the host's answer budget: a hung one stalls nobody long.
  auto client = docker::Client::connect(std::make_shared<BoundedTransport>(
      docker::make_curl_transport(*ep), host.name, std::chrono::seconds(config.host_answer_seconds),
      std::move(on_hung)));
  if (!client)
    return Error(Code::kUnavailable,
                 "host '" + host.name + "': cannot reach its Docker engine at " + ep->to_string() +
                     ": " + client.error().message,
                 // A TLS failure's hint says which side refused (docker/tls_diagnosis.h).
                 !client.error().hint.empty() ? client.error().hint
                 : ep->tls ? "check that dockerd runs there with --tlsverify and that the host's "
                             "certificate is signed by tls_ca for that name"
                           : std::string());
  return std::unique_ptr<Engine>(std::make_unique<DockerEngine>(
      std::move(*client), config, std::move(inventory), host.bind_ip));
}

}  // namespace gpulab::service
