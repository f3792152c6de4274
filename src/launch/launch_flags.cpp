// Validation of the launch flags and their translation into LaunchOptions.
#include "launch/launch_flags.h"

#include "core/flag_checks.h"
#include "launch/rank_cgroup.h"

namespace gpulab::launch {

Result<LaunchOptions> to_launch_options(const LaunchFlags& f) {
  for (const Status& s : {flag_in_range("nproc_per_node", f.nproc_per_node, 1, 1024),
                          flag_in_range("nnodes", f.nnodes, 1, 65536),
                          flag_in_range("node_rank", f.node_rank, 0, 65535),
                          flag_in_range("master_port", f.master_port, 0, 65535),
                          flag_in_range("max_restarts", f.max_restarts, 0, 1000),
                          flag_in_range("heartbeat_floor", f.heartbeat_floor_s, 0.1, 86400.0),
                          flag_in_range("stop_grace", f.stop_grace_s, 0.0, 60.0)})
    if (!s) return s.error();
  LaunchOptions lo;
  auto hang = hang_policy_from_flags(f.heartbeat_timeout, f.heartbeat_floor_s);
  if (!hang) return hang.error();
  lo.hang = *hang;
  if (!f.rank_memory_max.empty()) {
    auto bytes = parse_memory_size(f.rank_memory_max);
    if (!bytes)
      return Error{Code::kInvalidArgument, "--rank_memory_max " + bytes.error().message,
                   bytes.error().hint};
    lo.rank_memory_max_bytes = *bytes;
  }
  lo.nproc_per_node = f.nproc_per_node;
  lo.nnodes = f.nnodes;
  lo.node_rank = f.node_rank;
  lo.master_addr = f.master_addr;
  lo.master_port = f.master_port;
  lo.max_restarts = f.max_restarts;
  lo.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(f.stop_grace_s * 1000));
  return lo;
}

Status validate(const LaunchFlags& f) {
  auto lo = to_launch_options(f);
  if (!lo) return lo.error();
  return ok_status();
}

}  // namespace gpulab::launch
