// GPU leases for containers made outside the service (gpulab ddp): book, show, release.
#include "service/ops/leases/lease_ops.h"

#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/domain/validation.h"
#include "service/ops/hosts/host_fanout.h"

namespace gpulab::service {

LeaseOutcome create_lease(Service& s, const LeaseRequest& r) {
  check_name(r.name, "lease name");
  if (r.gpu_count < 0 || r.gpu_count > 64)
    throw ApiError(ApiCode::kInvalidRequest, "gpu_count must be 0..64");
  auto lock = s.lock_container(r.name);
  CreateOptions o;
  o.name = r.name;
  o.owner = r.owner;
  o.spec.gpu_count = r.gpu_count;
  o.spec.image = "(lease)";
  // gpulab ddp makes its container on its own engine: the host it names (found by the engine
  // id /healthz gives), else the first host. An unknown host is 400, a down one 503.
  o.host = !r.host.empty() ? r.host : s.hosts.empty() ? std::string() : s.hosts.front()->name();
  Allocation a = allocate(s, o, state::kLeased, r.ssh_port);
  s.store->audit(
      r.owner, "lease", r.name, "ok",
      "gpus=" + std::to_string(a.gpus.size()) + " ssh_port=" + std::to_string(a.ssh_port));
  LeaseOutcome out;
  out.record = *s.store->find_container(a.id);
  out.gpus = a.gpus;
  return out;
}

std::map<std::string, EngineContainer> lease_containers(
    Service& s, std::map<std::string, std::string>* missed) {
  // Hosts that are down show none: the reconciler leaves their leases alone until they answer;
  // one that does not answer in time is in `missed`, and its leases are left alone too.
  auto got = ask_hosts<Result<std::vector<EngineContainer>>>(
      s, [](const Host&, const Engine& e) { return e.list_containers({kLeaseLabel}); });
  std::map<std::string, EngineContainer> m;
  for (auto& [host, list] : got.answers) {
    if (!list) {
      if (s.hosts.size() == 1) throw_engine_error(list.error());
      got.missed[host] = list.error().message;  // went down since the check: as if down
      continue;
    }
    for (auto& c : *list) m[c.labels.at(kLeaseLabel)] = c;
  }
  if (missed) *missed = std::move(got.missed);
  return m;
}

void release_lease(Service& s, const ContainerRecord& lease) {
  std::map<std::string, std::string> missed;
  auto bound = lease_containers(s, &missed);
  if (missed.count(lease.host))  // its container may still run there: refused, nothing changes
    throw ApiError(ApiCode::kEngineUnavailable,
                   "host '" + lease.host + "' did not answer: " + missed.at(lease.host),
                   "try again once the host answers (GET /healthz shows each host's state)");
  if (auto it = bound.find(lease.name); it != bound.end())
    throw ApiError(
        ApiCode::kStateConflict,
        "Lease '" + lease.name + "' is still used by container '" + it->second.name + "'",
        "remove that container first; its GPUs are in use until then");
  s.store->remove_container(lease.id, true);
}

ContainerRecord require_lease(Service& s, const Principal& who, const std::string& name) {
  check_name(name, "lease name");
  auto c = s.store->find_container(name);
  if (!c || !is_lease(*c)) throw ApiError(ApiCode::kNotFound, "Lease '" + name + "' not found");
  require_owner(who, c->owner, "Lease '" + name + "'");
  return *c;
}

Json lease_json(Service& s, const ContainerRecord& c, const EngineContainer* bound,
                const std::vector<GpuSlot>* gpus) {
  LeaseFacts l;
  l.name = c.name;
  l.owner = c.owner;
  l.gpu_indices = c.gpu_indices();
  l.gpu_uuids = c.gpu_uuids();
  l.ssh_port = c.ssh_port;
  // The GPUs of its host (a lab's hosts may differ), formatted by that host's engine: no answer
  // from the engine is needed, so a down host's lease still lists.
  const Host* h = s.find_host(c.host);
  l.gpu_type = h ? h->inventory()->gpu_type : s.inventory().gpu_type;
  if (bound) l.container = bound->name;
  l.created_at = c.created_at;
  if (gpus) {
    l.attach = *gpus;
    l.grace_seconds = s.config.lease_grace_seconds;
  }
  return (h && h->engine() ? *h->engine() : s.engine()).lease_json(l);
}

}  // namespace gpulab::service
