// Greedy, deterministic GPU choice: grow a group from every free GPU, score each group by
// affinity and by how it leaves the rest of the machine, keep the best.
#include "service/domain/gpu_allocator.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpulab::service {

AllocationPolicy policy_from_string(const std::string& s) {
  return s == "spread" ? AllocationPolicy::kSpread : AllocationPolicy::kPack;
}

namespace {

bool linked(const GpuSlot& a, const GpuSlot& b) {
  return std::find(a.links.begin(), a.links.end(), b.index) != a.links.end() ||
         std::find(b.links.begin(), b.links.end(), a.index) != b.links.end();
}

int pair_score(const GpuSlot& a, const GpuSlot& b) {
  int s = 0;
  if (linked(a, b)) s += 2;
  if (a.numa_node >= 0 && a.numa_node == b.numa_node) s += 1;
  return s;
}

}  // namespace

int affinity_score(const std::vector<GpuSlot>& gpus) {
  int s = 0;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) s += pair_score(gpus[i], gpus[j]);
  return s;
}

std::optional<std::vector<GpuSlot>> choose_gpus(const std::vector<GpuSlot>& inventory,
                                                const std::set<std::string>& used, int count,
                                                AllocationPolicy policy) {
  if (count <= 0) return std::vector<GpuSlot>{};
  std::vector<GpuSlot> free;
  for (const auto& g : inventory)
    if (!used.count(g.uuid)) free.push_back(g);
  if (static_cast<int>(free.size()) < count) return std::nullopt;
  std::sort(free.begin(), free.end(),
            [](const GpuSlot& a, const GpuSlot& b) { return a.index < b.index; });

  // Free GPUs per NUMA node: pack prefers nodes with few free (best fit), spread the opposite.
  std::map<int, int> free_on_node;
  for (const auto& g : free) ++free_on_node[g.numa_node];

  std::vector<GpuSlot> best;
  std::tuple<int, int, int> best_key{};  // compared lexicographically, larger is better
  bool have_best = false;
  for (size_t seed = 0; seed < free.size(); ++seed) {
    std::vector<GpuSlot> group{free[seed]};
    std::vector<bool> taken(free.size(), false);
    taken[seed] = true;
    while (static_cast<int>(group.size()) < count) {
      int pick = -1;
      int pick_score = -1;
      for (size_t i = 0; i < free.size(); ++i) {
        if (taken[i]) continue;
        int s = 0;
        for (const auto& m : group) s += pair_score(m, free[i]);
        if (s > pick_score) {  // ties keep the lower index (free is sorted)
          pick_score = s;
          pick = static_cast<int>(i);
        }
      }
      taken[pick] = true;
      group.push_back(free[pick]);
    }
    int affinity = affinity_score(group);
    int fit = free_on_node[free[seed].numa_node];
    int fit_key = policy == AllocationPolicy::kPack ? -fit : fit;
    int index_key = -free[seed].index;  // lower seed index wins among equals
    std::tuple<int, int, int> key{affinity, fit_key, index_key};
    if (!have_best || key > best_key) {
      best = group;
      best_key = key;
      have_best = true;
    }
  }
  std::sort(best.begin(), best.end(),
            [](const GpuSlot& a, const GpuSlot& b) { return a.index < b.index; });
  return best;
}

}  // namespace gpulab::service
