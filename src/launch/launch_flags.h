// The launch flags as the user typed them (--nproc_per_node ... --rank_memory_max), shared by
// `gpulab launch` and the commands that start their own ranks (`gpulab train`, `gpulab bench`):
// checked once here, then turned into the launcher's LaunchOptions.
#pragma once

#include <string>
#include <vector>

#include "core/option_rows.h"
#include "core/result.h"
#include "launch/launcher.h"

namespace gpulab::launch {

struct LaunchFlags {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // empty: 127.0.0.1
  int master_port = 0;      // 0: a free port (one node) or 29500 (several)
  int max_restarts = 0;
  // Hang detection (HangPolicy): "auto" learns the limit from the ranks' step times, with
  // heartbeat_floor_s as its least value; "0" is off; seconds set a fixed limit.
  std::string heartbeat_timeout = "auto";
  double heartbeat_floor_s = 60;
  // Non-empty ("300M"): each rank in its own cgroup with this memory cap (rank_cgroup.h).
  std::string rank_memory_max;
  double stop_grace_s = 3;  // between the stop signal and SIGKILL
};

// The flags as rows: name, field, help and range, in --help order
// (apps/gpulab/base/launch_flags.cpp registers them).
const std::vector<OptionRow<LaunchFlags>>& launch_flag_rows();

// The launcher's options for these flags; the caller adds the command. kInvalidArgument naming
// the flag unless every value is in range (--node_rank 0..65535, --master_port 0..65535, ...)
// and --heartbeat_timeout and --rank_memory_max are readable.
Result<LaunchOptions> to_launch_options(const LaunchFlags& flags);
// The same check, for validators of structs that hold the flags (DistOptions).
Status validate(const LaunchFlags& flags);

}  // namespace gpulab::launch
