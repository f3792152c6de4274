// Chooses which free GPUs a container gets: exclusive, by UUID, "pack" (fill partly used NUMA
// nodes first, keep whole nodes free for big requests) or "spread"; among equals it prefers GPUs
// that are linked to each other and share a NUMA node, then lower indices.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "service/base/config.h"

namespace gpulab::service {

enum class AllocationPolicy { kPack, kSpread };

AllocationPolicy policy_from_string(const std::string& s);

// Picks `count` GPUs from `inventory` whose uuid is not in `used`; nullopt when too few are
// free. Pure: the caller records the choice (in a transaction) before anyone else can choose.
std::optional<std::vector<GpuSlot>> choose_gpus(const std::vector<GpuSlot>& inventory,
                                                const std::set<std::string>& used, int count,
                                                AllocationPolicy policy);

// How well a set of GPUs sits together: 2 per linked pair, 1 per pair on the same NUMA node.
int affinity_score(const std::vector<GpuSlot>& gpus);

}  // namespace gpulab::service
