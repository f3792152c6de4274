// GPU leases for containers made outside the service (gpulab ddp): book, show, release.
#include "service/lease_ops.h"

#include "core/strings.h"
#include "service/api_error.h"
#include "service/validation.h"

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
  Allocation a = allocate(s, o, state::kLeased, r.ssh_port);
  s.store->audit(
      r.owner, "lease", r.name, "ok",
      "gpus=" + std::to_string(a.gpus.size()) + " ssh_port=" + std::to_string(a.ssh_port));
  LeaseOutcome out;
  out.record = *s.store->find_container(a.id);
  out.attachment = attachment_for(a.gpus, s.config);
  return out;
}

std::map<std::string, docker::ContainerSummary> lease_containers(Service& s) {
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = {kLeaseLabel};
  auto list = s.docker().list_containers(lo);
  if (!list) throw_engine_error(list.error());
  std::map<std::string, docker::ContainerSummary> m;
  for (auto& c : *list) m[c.labels.at(kLeaseLabel)] = c;
  return m;
}

std::set<std::string> unleased_ddp_gpus(Service& s) {
  std::set<std::string> held;
  if (!s.engine) return held;
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = {"gpulab.kind=ddp"};
  auto list = s.engine->list_containers(lo);
  if (!list) return held;
  for (const auto& c : *list) {
    if (c.labels.count(kLeaseLabel)) continue;  // booked through a lease already
    auto it = c.labels.find("gpulab.gpu_indices");
    if (it == c.labels.end()) continue;
    for (const auto& idx : split(it->second, ','))
      for (const auto& g : s.inventory.gpus)
        if (!idx.empty() && std::to_string(g.index) == idx) held.insert(g.uuid);
  }
  return held;
}

void release_lease(Service& s, const ContainerRecord& lease) {
  auto bound = lease_containers(s);
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

Json lease_json(Service& s, const ContainerRecord& c, const docker::ContainerSummary* bound,
                const GpuAttachment* att) {
  docker::GpuLease l;
  l.name = c.name;
  l.owner = c.owner;
  l.gpu_indices = c.gpu_indices();
  l.gpu_uuids = c.gpu_uuids();
  l.ssh_port = c.ssh_port;
  l.gpu_type = s.inventory.gpu_type;
  if (bound) l.container = bound->name;
  l.created_at = c.created_at;
  if (att) {
    l.attachment = docker::LeaseAttachment{att->env, att->requests, att->devices};
    l.grace_seconds = s.config.lease_grace_seconds;
    // Lets the caller check that it creates its container on the engine the service books for.
    if (auto info = s.docker().info(); info) l.engine_id = info->id;
  }
  return l.to_json();
}

}  // namespace gpulab::service
