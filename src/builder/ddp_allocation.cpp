// gpulab ddp's GPU and SSH port allocation: a lease from gpulab serve, or a direct choice.
#include "builder/ddp_allocation.h"

#include <ostream>
#include <set>

#include "core/ports.h"
#include "core/random.h"
#include "core/strings.h"
#include "docker/gpu_attachment.h"
#include "gpu/host.h"

namespace gpulab::builder {

namespace {

// The seed's SSH ports: base+11, base+22, ... the first one no process and no container holds.
int pick_ssh_port(int base, const std::set<int>& taken) {
  if (auto p = next_ssh_port(base, kSshPortStep, taken)) return *p;
  throw Exception(Code::kResourceExhausted, "no free SSH port above " + std::to_string(base),
                  "stop unused ddp containers or pass --ssh-port-base");
}

// "lab1 1a2b..., lab2 (down)" or the one engine's id: what the service books for.
std::string engines_text(const ServiceHealth& h) {
  if (h.hosts.empty()) return h.engine_id.empty() ? "unknown" : h.engine_id;
  std::string out;
  for (const auto& x : h.hosts)
    out +=
        (out.empty() ? "" : ", ") + x.name + " " + (x.engine_id.empty() ? "(down)" : x.engine_id);
  return out;
}

Exception allocation_failed(int asked, size_t free, const std::string& hint) {
  return Exception(Code::kResourceExhausted,
                   "GPU allocation failed: " + std::to_string(asked) + " requested, " +
                       std::to_string(free) + " free",
                   hint);
}

}  // namespace

DdpAllocator::DdpAllocator(const DdpOptions& opts, const docker::LabEngine& engine,
                           const gpu::Inventory& inv, std::ostream& out)
    : opts_(opts), engine_(engine), inv_(inv) {
  if (opts.no_service) {
    out << "Allocation: directly on the engine (--no-service)\n";
    return;
  }
  const bool named = !opts.service_url.empty();
  const std::string url = named ? opts.service_url : kDefaultServiceUrl;
  auto svc = ServiceClient::open(url, opts.token);
  if (!svc) throw Exception(svc.error());
  auto health = svc->health();
  if (!health) {
    if (named) throw Exception(health.error());
    out << "Allocation: directly on the engine (no gpulab serve answers at " << url << ")\n";
    return;
  }
  // A lease books GPUs of one engine: ddp's own must be one the service books for (a lab
  // service's hosts each have one; /healthz gives their ids).
  auto id = engine.engine_id();
  std::string mine = id ? *id : "";
  const auto hosts = health->hosts_of(mine);
  if (hosts.size() > 1)
    throw Exception(Code::kConflict,
                    "hosts " + join(hosts, ", ") + " of gpulab serve at " + url +
                        " report the same engine ID as the engine ddp uses (" + mine +
                        "): it cannot tell which one this is",
                    "give each host's dockerd an identity of its own (Docker 20.10: a different "
                    "/etc/docker/key.json; Docker 23+: engine-id in its data root), or pass "
                    "--no-service");
  if (hosts.empty()) {
    std::string why = "gpulab serve at " + url + " books GPUs for other engines (" +
                      engines_text(*health) + ") than the one ddp uses (" + engine.describe() + ")";
    if (named)
      throw Exception(Code::kConflict, why,
                      "pass --docker-host of the service's engine, or --no-service");
    out << "Allocation: directly on the engine (" << why << ")\n";
    return;
  }
  service_.emplace(std::move(*svc));
  service_host_ = hosts.front();
  service_gpus_ = health->gpus;
  for (const auto& h : health->hosts)
    if (h.name == service_host_) service_gpus_ = h.gpus;
  out << "Allocation: through gpulab serve at " << url
      << (service_host_.empty() ? "" : " (host " + service_host_ + ")")
      << " (a lease in its books)\n";
}

DdpGrant DdpAllocator::allocate(int gpus, bool want_ssh) {
  if (!service_) return allocate_direct(gpus, want_ssh);
  DdpGrant g;
  // A service without GPUs runs CPU ranks: book the SSH port alone.
  int asked = service_gpus_ > 0 ? gpus : 0;
  auto lease =
      service_->lease("ddp-" + random_string(5, kNameAlphabet), asked, want_ssh, service_host_);
  if (!lease) {
    if (lease.error().code == Code::kResourceExhausted && asked > 0)
      throw allocation_failed(gpus, 0, lease.error().message);
    if (lease.error().code == Code::kUnauthenticated)
      throw Exception(Code::kUnauthenticated, lease.error().message,
                      "pass --token (or set GPULAB_TOKEN) for gpulab serve at " + service_->url() +
                          ", or --no-service to allocate directly on the engine");
    throw Exception(lease.error());
  }
  g.lease = lease->name;
  g.gpu_indices = lease->gpu_indices;
  g.ssh_port = lease->ssh_port;
  g.env = lease->attachment->env;
  g.gpu_requests = lease->attachment->device_requests;
  g.devices = lease->attachment->devices;
  g.labels = {{lease->label, lease->name}};
  return g;
}

DdpGrant DdpAllocator::allocate_direct(int gpus, bool want_ssh) {
  // GPUs and ports held by other containers (ddp's by index, the service's by UUID).
  std::set<int> used_gpus, used_ports;
  if (auto list = engine_.containers({}, /*all=*/false); list.ok()) {
    for (const auto& c : *list) {
      if (auto it = c.labels.find("gpulab.gpu_indices"); it != c.labels.end())
        for (const auto& s : split(it->second, ','))
          if (!s.empty()) used_gpus.insert(std::atoi(s.c_str()));
      if (auto it = c.labels.find("gpulab.gpus"); it != c.labels.end())
        for (const auto& uuid : split(it->second, ','))
          for (const auto& gi : inv_.gpus)
            if (gi.uuid && *gi.uuid == uuid) used_gpus.insert(gi.index);
      for (const auto& p : c.ports) used_ports.insert(p.host_port);
    }
  }
  DdpGrant g;
  std::vector<const gpu::GpuInfo*> picked;
  for (const auto& gi : inv_.gpus) {
    if (static_cast<int>(picked.size()) == gpus) break;
    if (used_gpus.count(gi.index)) continue;
    picked.push_back(&gi);
    g.gpu_indices.push_back(gi.index);
  }
  if (!inv_.gpus.empty() && static_cast<int>(g.gpu_indices.size()) < gpus)
    throw allocation_failed(
        gpus, g.gpu_indices.size(),
        "stop other ddp containers (docker ps | grep ddp-) or ask for fewer GPUs");
  // The service's attachment policy (docker/gpu_attachment.h): each GPU's own device, nothing more.
  std::vector<docker::AttachedGpu> attached;
  for (const gpu::GpuInfo* p : picked) {
    const gpu::GpuInfo& gi = *p;
    docker::AttachedGpu a{gpu::vendor_name(gi.vendor), gi.uuid.value_or(std::to_string(gi.index)),
                          "", ""};
    if (gi.vendor == gpu::Vendor::kAmd) {
      if (gi.pci_bus_id) a.render_node = gpu::render_node_of(*gi.pci_bus_id);
      // Without its render node the container would get /dev/kfd and no GPU: say so instead.
      if (a.render_node.empty())
        throw Exception(
            Code::kUnavailable,
            "AMD GPU " + std::to_string(gi.index) + " has no render node (" +
                gi.pci_bus_id.value_or("no PCI address") + ")",
            "check that the amdgpu driver is loaded (ls /dev/dri) and run gpulab detect");
    }
    attached.push_back(std::move(a));
  }
  docker::AttachmentOptions options;
  options.video_group = true;  // ddp's ranks may run as a user; lab images have the group
  auto attachment = docker::gpu_attachment(attached, options);
  g.env = std::move(attachment.env);
  g.gpu_requests = std::move(attachment.requests);
  g.devices = std::move(attachment.devices);
  g.group_add = std::move(attachment.group_add);
  if (want_ssh) g.ssh_port = pick_ssh_port(opts_.ssh_port_base, used_ports);
  return g;
}

void DdpAllocator::release(const DdpGrant& grant, std::ostream& out) const {
  if (!service_ || grant.lease.empty()) return;
  auto st = service_->release(grant.lease);
  if (st)
    out << "Released lease " << grant.lease << " in gpulab serve\n";
  else if (st.error().code == Code::kNotFound)  // its reconciler saw the container go first
    out << "Released lease " << grant.lease << " in gpulab serve (it had seen the container go)\n";
  else
    out << "warning: could not release lease " << grant.lease << ": " << st.error().message
        << " (the service releases it once it sees the container gone)\n";
}

}  // namespace gpulab::builder
