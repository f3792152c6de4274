// The GPU view of gpu_view.h.
#include "service/ops/containers/gpu_view.h"

namespace gpulab::service {

std::string gpu_id(const GpuSlot& g) {
  return g.host + ":" + std::to_string(g.index);
}

std::vector<GpuEntry> gpu_entries(const Service& s) {
  const auto holders = s.store->gpu_holders();
  std::vector<GpuEntry> out;
  for (const auto& h : s.hosts) {
    // The one host of a lab without a hosts list is always offered, as before hosts existed.
    const bool offered = s.hosts.size() == 1 || (h->up() && h->responsive());
    const auto inventory = h->inventory();
    for (const auto& g : inventory->gpus) {
      GpuEntry e{g, {}, {}, offered};
      e.slot.host = h->name();  // whoever filled the slot, it is this host's
      e.id = gpu_id(e.slot);
      if (auto it = holders.find(g.uuid); it != holders.end()) e.holder = it->second;
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace gpulab::service
