// The allocation transaction of allocation.h.
#include "service/ops/containers/allocation.h"

#include <algorithm>

#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/domain/port_allocator.h"
#include "service/ops/hosts/host_fanout.h"
#include "service/ops/policies/quota.h"
#include "service/ops/policies/usage_meter.h"
#include "service/store/refused_ports.h"

namespace gpulab::service {

std::set<std::string> unleased_ddp_gpus(Service& s) {
  // A host that does not answer in time adds none; placement leaves it out (hosts_with_image).
  auto got = ask_hosts<std::vector<std::string>>(
      s, [](const Host&, const Engine& e) { return e.gpus_held_outside(); });
  std::set<std::string> out;
  for (auto& [host, uuids] : got.answers) out.insert(uuids.begin(), uuids.end());
  return out;
}

Host& asked_host(Service& s, const std::string& name) {
  Host* h = s.find_host(name);
  if (!h) {
    std::vector<std::string> names;
    for (const auto& x : s.hosts) names.push_back(x->name());
    throw ApiError(ApiCode::kInvalidRequest, "host: unknown host '" + name + "'",
                   "hosts of this lab: " + join(names, ", ") + " (or leave out \"host\")");
  }
  (void)s.engine_on(name);  // 503 naming it while it is down
  return *h;
}

namespace {

struct Placement {
  Host* host = nullptr;
  std::vector<GpuSlot> gpus;
};

// The host and GPUs for `count` GPUs, none of `used`; GPU_ALLOCATION_FAILED when no host that
// is up has them (saying when no host has that many at all).
Placement place(Service& s, const CreateOptions& o, const std::set<std::string>& used,
                const std::vector<Host*>& with_image) {
  std::vector<Host*> candidates;
  for (Host* h : with_image)
    if (s.usable(*h)) candidates.push_back(h);
  // The asked host went down since it was asked: its 503.
  if (candidates.empty() && !o.host.empty()) (void)s.engine_on(o.host);
  Placement best;
  long best_free = 0;
  size_t free_up = 0, largest = 0;
  for (Host* h : candidates) {
    const auto inventory = h->inventory();  // held: gpus is read below
    const auto& gpus = inventory->gpus;
    long free = std::count_if(gpus.begin(), gpus.end(),
                              [&](const GpuSlot& g) { return !used.count(g.uuid); });
    free_up += static_cast<size_t>(free);
    auto chosen = choose_gpus(gpus, used, o.spec.gpu_count, s.policy);
    if (!chosen) continue;
    // pack: the fullest host that fits keeps whole hosts free; spread: the emptiest.
    bool better =
        !best.host || (s.policy == AllocationPolicy::kPack ? free < best_free : free > best_free);
    if (better) {
      best = Placement{h, *chosen};
      best_free = free;
    }
  }
  if (best.host) return best;
  if (candidates.empty())
    throw ApiError(ApiCode::kEngineUnavailable, "no host of the lab is up",
                   "see /readyz for each host's state; start their Docker engines");
  s.metrics.increment("gpu_allocation_failures");
  for (const auto& h : s.hosts) largest = std::max(largest, h->inventory()->gpus.size());
  const Host* only = o.host.empty() ? nullptr : candidates.front();
  size_t biggest = only ? only->inventory()->gpus.size() : largest;
  if (static_cast<size_t>(o.spec.gpu_count) > biggest)
    throw ApiError(ApiCode::kGpuAllocationFailed, "GPU allocation failed",
                   std::to_string(o.spec.gpu_count) + " GPU(s) asked; " +
                       (only ? "host '" + only->name() + "'" : std::string("the largest host")) +
                       " has " + std::to_string(biggest) + " GPUs: ask for at most that many");
  throw ApiError(ApiCode::kGpuAllocationFailed, "GPU allocation failed",
                 std::to_string(o.spec.gpu_count) + " GPU(s) asked, " + std::to_string(free_up) +
                     " free on the hosts that are up (a down host's are not offered); check "
                     "/api/v1/gpu-docker/status (available_gpus) and delete unused containers");
}

}  // namespace

std::vector<Host*> hosts_with_image(Service& s, const CreateOptions& o) {
  const std::string image = o.spec.image;
  const bool lease = image == "(lease)";  // a lease runs no image of its own
  if (!o.host.empty()) {
    Host& h = asked_host(s, o.host);
    if (lease || s.engine_on(o.host).image_exists(image)) return {&h};
    return {};
  }
  auto got = ask_hosts<bool>(
      s, [image, lease](const Host&, const Engine& e) { return lease || e.image_exists(image); });
  std::vector<Host*> out;
  for (const auto& h : s.hosts)
    if (auto it = got.answers.find(h->name()); it != got.answers.end() && it->second)
      out.push_back(h.get());
  return out;
}

int choose_host_ports(Service& s, const Host& h, const std::vector<PortMapping>& ports,
                      bool with_ssh) {
  const std::string& host = h.name();
  // Which host, where the lab has several (a single-host lab's messages stay the seed's).
  const std::string where = s.hosts.size() > 1 ? " on host '" + host + "'" : "";
  // A port free on this machine says nothing of another host's: probe only the local one.
  const PortProbe probe = h.local() ? PortProbe(host_port_bindable) : PortProbe();
  std::set<int> unavailable = s.store->unavailable_ports(s.config.port_rest_seconds, host);
  // Ports the engine refused lately are taken there, whatever the book says.
  unavailable.merge(refused_ports(*s.store, host, unix_now_precise()));
  std::vector<int> wanted;
  for (const auto& p : ports) wanted.push_back(p.host_port);
  auto taken = taken_ports(wanted, unavailable, probe);
  if (!taken.empty()) {
    // Nothing listens on a resting port: say so, and for how long, rather than "in use".
    auto resting = s.store->resting_ports(s.config.port_rest_seconds, host);
    auto held = s.store->port_holders(host);
    bool all_resting = std::all_of(taken.begin(), taken.end(), [&](int p) {
      return resting.count(p) && !held.count(p) && (!probe || probe(p));
    });
    if (all_resting) {
      std::erase_if(resting, [&](const auto& kv) {
        return std::find(taken.begin(), taken.end(), kv.first) == taken.end();
      });
      throw ApiError(ApiCode::kPortConflict, port_resting_message(resting) + where,
                     "a deleted container's ports rest for port_rest_seconds (" +
                         std::to_string(s.config.port_rest_seconds) +
                         " s) before reuse; wait, or use different host ports");
    }
    throw ApiError(ApiCode::kPortConflict, port_conflict_message(taken) + where,
                   "use different host ports");
  }
  if (!with_ssh) return 0;
  for (int p : wanted) unavailable.insert(p);
  auto ssh = next_ssh_port(s.config.ssh_port_base, s.config.ssh_port_step, unavailable, probe);
  if (!ssh) throw ApiError(ApiCode::kPortExhausted, "No free SSH port left" + where);
  return *ssh;
}

std::set<std::string> gpus_in_use(Service& s, std::set<std::string> outside,
                                  const std::string& except) {
  for (const auto& [uuid, holder] : s.store->gpu_holders())
    if (except.empty() || holder != except) outside.insert(uuid);
  return outside;
}

std::string choose_host(Service& s, const CreateOptions& o) {
  if (!o.host.empty()) return asked_host(s, o.host).name();
  std::vector<Host*> up;
  for (const auto& h : s.hosts)
    if (s.usable(*h)) up.push_back(h.get());
  std::set<std::string> outside;
  if (o.spec.gpu_count > 0) outside = unleased_ddp_gpus(s);
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  return place(s, o, gpus_in_use(s, std::move(outside)), up).host->name();
}

Allocation allocate(Service& s, const CreateOptions& o, const std::string& state, bool with_ssh,
                    const std::vector<Host*>* asked) {
  const std::vector<Host*> with_image = asked ? *asked : hosts_with_image(s, o);
  // GPUs a ddp run outside the service holds are not free either (asked only when needed, and
  // before the allocation lock: a slow host must not hold up every other booking).
  std::set<std::string> outside;
  if (o.spec.gpu_count > 0) outside = unleased_ddp_gpus(s);
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  return s.store->transaction([&] {
    if (s.store->find_container(o.name))
      throw ApiError(ApiCode::kNameConflict, "Container '" + o.name + "' already exists");
    meter_tick(*s.store, s.clock->now());  // holders so far are charged up to now
    check_quota(s, o.owner, o.spec, state != service::state::kLeased);
    Placement where = place(s, o, gpus_in_use(s, outside), with_image);
    const std::string& host = where.host->name();
    const int ssh = choose_host_ports(s, *where.host, o.spec.ports, with_ssh);
    ContainerRecord rec;
    rec.name = o.name;
    rec.owner = o.owner;
    rec.state = state;
    rec.spec = o.spec;
    rec.ssh_port = ssh;
    rec.host = host;
    Allocation a;
    a.id = s.store->insert_container(rec);
    for (const auto& g : where.gpus) s.store->add_gpu(a.id, GpuAssignment{g.uuid, g.index});
    if (with_ssh) s.store->add_port(a.id, ssh, "ssh", 22);
    for (const auto& p : o.spec.ports)
      s.store->add_port(a.id, p.host_port, "user", p.container_port);
    a.gpus = where.gpus;
    a.ssh_port = ssh;
    a.host = host;
    return a;
  });
}

}  // namespace gpulab::service
