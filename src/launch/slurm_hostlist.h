// Slurm's compact host list syntax ("gpu[01-03,07],login1", "rack[1-2]-n[1-2]") expanded into
// host names and compressed back, as `scontrol show hostnames` / `hostlist` do, without asking
// a Slurm command: ranks read SLURM_STEP_NODELIST themselves.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::launch {

// "gpu[01-03,07],cpu1" -> gpu01 gpu02 gpu03 gpu07 cpu1. Zero padding follows the range's first
// number. Every bracket of a name multiplies ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2).
// An unbalanced bracket, an empty range or a reversed one is an error naming the list.
Result<std::vector<std::string>> expand_hostlist(std::string_view list);

// The inverse for host names sharing a prefix: node1 node2 node3 node5 -> "node[1-3,5]".
// Names without a trailing number are listed as they are.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace gpulab::launch
