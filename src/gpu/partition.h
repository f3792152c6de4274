// The AMD partition-mode requirement (`--require-partition NPS1,SPX`): the seed's DDP tool runs
// only on MI300X in NPS1 memory mode and SPX compute mode, and says so when it is not.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "gpu/inventory.h"

namespace gpulab::gpu {

struct PartitionRequirement {
  std::optional<std::string> memory;   // NPS1, NPS2, NPS4, NPS8
  std::optional<std::string> compute;  // SPX, DPX, TPX, QPX, CPX
};

// Parses "NPS1,SPX" (either order, either part optional, any case); bad tokens are
// kInvalidArgument.
Result<PartitionRequirement> parse_partition_requirement(std::string_view list);

// Checks every AMD GPU of the inventory. A mismatch is kUnsupported with the seed's message
//   Detected unsupported configuration
//   Current configuration: NPS2, CPX
// and a hint naming the amd-smi / rocm-smi commands that fix it. No AMD GPU is kUnavailable.
Status check_partition(const Inventory& inv, const PartitionRequirement& req);

// For `gpulab ddp`: detect, check, and throw gpulab::Exception on failure.
void require_partition(std::string_view list, const DetectOptions& opts = {});

}  // namespace gpulab::gpu
