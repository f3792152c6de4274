// The launch flags as rows (name, field, help, range), their validation and their translation
// into LaunchOptions.
#include "launch/launch_flags.h"

#include "launch/rank_cgroup.h"

namespace gpulab::launch {

namespace {

using LF = LaunchFlags;

// clang-format off
const std::vector<OptionRow<LaunchFlags>> kLaunchFlagRows = {
    {"nproc_per_node", &LF::nproc_per_node, "ranks to start on this node (one GPU each, or a share of the CPU cores)", nullptr, FlagRange{1, 1024}},
    {"nnodes", &LF::nnodes, "nodes in the job", nullptr, FlagRange{1, 65536}},
    {"node_rank", &LF::node_rank, "this node's index (0 hosts the rendezvous)", nullptr, FlagRange{0, 65535}},
    {"master_addr", &LF::master_addr, "address of node 0 (default 127.0.0.1)", nullptr, std::nullopt, false},
    {"master_port", &LF::master_port, "rendezvous port (default: a free port on one node, 29500 on several or in lab containers)", nullptr, FlagRange{0, 65535}, false},
    {"max_restarts", &LF::max_restarts, "restart all ranks after a failure, K times (gpulab train resumes from the newest checkpoint)", nullptr, FlagRange{0, 1000}},
    {"heartbeat_timeout", &LF::heartbeat_timeout, "when a rank that runs but makes no progress (gpulab train: a training or evaluation batch, a collective; another command: a write to $GPULAB_HEARTBEAT_FILE) is hung and the job stopped: auto (a rank silent for longer than 10 x its slowest phase, and at least --heartbeat_floor, once it has done a few steps), seconds (a fixed limit), or 0 (off)"},
    {"heartbeat_floor", &LF::heartbeat_floor_s, "seconds of silence that --heartbeat_timeout auto always allows (raise it when checkpoints take longer to write)", nullptr, FlagRange{0.1, 86400}},
    {"rank_memory_max", &LF::rank_memory_max, "memory cap of each rank (e.g. 300M, 2G): every rank runs in its own cgroup (v2, else v1 memory controller) and one that outgrows it is ended by the kernel's OOM killer, which the launcher reports (even with one rank)", nullptr, std::nullopt, false},
    {"stop_grace", &LF::stop_grace_s, "seconds between the stop signal (SIGTERM, or the user's SIGINT) and SIGKILL when stopping the ranks (0 to 60)", nullptr, FlagRange{0, 60}},
};
// clang-format on

}  // namespace

const std::vector<OptionRow<LaunchFlags>>& launch_flag_rows() {
  return kLaunchFlagRows;
}

Result<LaunchOptions> to_launch_options(const LaunchFlags& f) {
  if (auto st = check_option_rows(f, kLaunchFlagRows); !st) return st.error();
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
