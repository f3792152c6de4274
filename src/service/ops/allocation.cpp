// The allocation transaction of allocation.h.
#include "service/ops/allocation.h"

#include <algorithm>

#include "service/base/api_error.h"
#include "service/domain/port_allocator.h"
#include "service/ops/quota.h"
#include "service/ops/usage_meter.h"

namespace gpulab::service {

std::set<std::string> unleased_ddp_gpus(Service& s) {
  if (!s.engine_ptr) return {};
  auto held = s.engine_ptr->gpus_held_outside();
  return {held.begin(), held.end()};
}

Allocation allocate(Service& s, const CreateOptions& o, const std::string& state, bool with_ssh) {
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  // GPUs a ddp run outside the service holds are not free either (asked only when needed).
  std::set<std::string> outside;
  if (o.spec.gpu_count > 0) outside = unleased_ddp_gpus(s);
  return s.store->transaction([&] {
    if (s.store->find_container(o.name))
      throw ApiError(ApiCode::kNameConflict, "Container '" + o.name + "' already exists");
    meter_tick(*s.store, s.clock->now());  // holders so far are charged up to now
    check_quota(s, o.owner, o.spec, state != service::state::kLeased);
    std::set<std::string> used = outside;
    for (const auto& [uuid, holder] : s.store->gpu_holders()) used.insert(uuid);
    auto chosen = choose_gpus(s.inventory.gpus, used, o.spec.gpu_count, s.policy);
    if (!chosen) {
      s.metrics.increment("gpu_allocation_failures");
      throw ApiError(ApiCode::kGpuAllocationFailed, "GPU allocation failed",
                     std::to_string(o.spec.gpu_count) + " GPU(s) asked, " +
                         std::to_string(s.inventory.gpus.size() - used.size()) +
                         " free; check /api/v1/gpu-docker/status and delete unused containers");
    }
    std::set<int> unavailable = s.store->unavailable_ports(s.config.port_rest_seconds);
    std::vector<int> wanted;
    for (const auto& p : o.spec.ports) wanted.push_back(p.host_port);
    auto taken = taken_ports(wanted, unavailable);
    if (!taken.empty()) {
      // Nothing listens on a resting port: say so, and for how long, rather than "in use".
      auto resting = s.store->resting_ports(s.config.port_rest_seconds);
      auto held = s.store->port_holders();
      bool all_resting = std::all_of(taken.begin(), taken.end(), [&](int p) {
        return resting.count(p) && !held.count(p) && host_port_bindable(p);
      });
      if (all_resting) {
        std::erase_if(resting, [&](const auto& kv) {
          return std::find(taken.begin(), taken.end(), kv.first) == taken.end();
        });
        throw ApiError(ApiCode::kPortConflict, port_resting_message(resting),
                       "a deleted container's ports rest for port_rest_seconds (" +
                           std::to_string(s.config.port_rest_seconds) +
                           " s) before reuse; wait, or use different host ports");
      }
      throw ApiError(ApiCode::kPortConflict, port_conflict_message(taken),
                     "use different host ports");
    }
    for (int p : wanted) unavailable.insert(p);
    std::optional<int> ssh = 0;
    if (with_ssh) ssh = next_ssh_port(s.config.ssh_port_base, s.config.ssh_port_step, unavailable);
    if (!ssh) throw ApiError(ApiCode::kPortExhausted, "No free SSH port left");
    ContainerRecord rec;
    rec.name = o.name;
    rec.owner = o.owner;
    rec.state = state;
    rec.spec = o.spec;
    rec.ssh_port = *ssh;
    Allocation a;
    a.id = s.store->insert_container(rec);
    for (const auto& g : *chosen) s.store->add_gpu(a.id, GpuAssignment{g.uuid, g.index});
    if (with_ssh) s.store->add_port(a.id, *ssh, "ssh", 22);
    for (const auto& p : o.spec.ports)
      s.store->add_port(a.id, p.host_port, "user", p.container_port);
    a.gpus = *chosen;
    a.ssh_port = *ssh;
    return a;
  });
}

}  // namespace gpulab::service
