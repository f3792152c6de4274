// The launch flags, registered once for every command that has them.
#include "base/launch_flags.h"

namespace gpulab::cli {

void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, LaunchFlagSet set,
                      const std::string& group) {
  cmd->add_option("--nproc_per_node", f.nproc_per_node,
                  "ranks to start on this node (one GPU each, or a share of the CPU cores)")
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--nnodes", f.nnodes, "nodes in the job")->group(group)->capture_default_str();
  cmd->add_option("--node_rank", f.node_rank, "this node's index (0 hosts the rendezvous)")
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--master_addr", f.master_addr, "address of node 0 (default 127.0.0.1)")
      ->group(group);
  cmd->add_option("--master_port", f.master_port,
                  "rendezvous port (default: a free port on one node, 29500 on several)")
      ->group(group);
  if (set == LaunchFlagSet::kRendezvous) return;
  cmd->add_option("--max_restarts", f.max_restarts,
                  "restart all ranks after a failure, K times (gpulab train resumes from the "
                  "newest checkpoint)")
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--heartbeat_timeout", f.heartbeat_timeout,
                  "when a rank that runs but makes no progress (gpulab train: a training or "
                  "evaluation batch, a collective; another command: a write to "
                  "$GPULAB_HEARTBEAT_FILE) is hung and the job stopped: auto (a rank silent for "
                  "longer than 10 x its slowest phase, and at least --heartbeat_floor, once it "
                  "has done a few steps), seconds (a fixed limit), or 0 (off)")
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--heartbeat_floor", f.heartbeat_floor_s,
                  "seconds of silence that --heartbeat_timeout auto always allows (raise it "
                  "when checkpoints take longer to write)")
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--rank_memory_max", f.rank_memory_max,
                  "memory cap of each rank (e.g. 300M, 2G): every rank runs in its own cgroup "
                  "(v2, else v1 memory controller) and one that outgrows it is ended by the "
                  "kernel's OOM killer, which the launcher reports (even with one rank)")
      ->group(group);
}

}  // namespace gpulab::cli
