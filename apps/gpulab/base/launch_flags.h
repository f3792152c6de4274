// The flag table of launch::LaunchFlags: --nproc_per_node ... --rank_memory_max, registered
// the same way by `gpulab launch` and by the commands that start their own ranks.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "launch/launch_flags.h"

namespace gpulab::cli {

// kRendezvous: --nproc_per_node, --nnodes, --node_rank, --master_addr, --master_port.
// kAll adds --max_restarts, --heartbeat_timeout, --heartbeat_floor, --rank_memory_max and
// --stop_grace.
// Values are checked by launch::validate, not here.
enum class LaunchFlagSet { kRendezvous, kAll };

void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, LaunchFlagSet set,
                      const std::string& group = "Options");
// The flags named in `only` (without dashes), or all of them when it is empty (`gpulab ddp`
// takes --nnodes, --node_rank and --master_port).
void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, const std::vector<std::string>& only,
                      const std::string& group = "Options");

}  // namespace gpulab::cli
