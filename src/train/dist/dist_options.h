// The DDP flags of `gpulab train` (and `gpulab bench allreduce`) in one struct, their CLI
// registration, and the two entry points a command needs: start the ranks when asked to
// (--nproc_per_node/--nnodes), or, inside a rank, build the distributed context.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "train/dist_hooks.h"

namespace gpulab::train::dist {

struct DistOptions {
  // Launching (this node's share of the job).
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // empty: 127.0.0.1
  int master_port = 0;      // 0: a free port (one node) or 29500 (several)
  int max_restarts = 0;
  // Hang detection (launch::HangPolicy): "auto" learns the limit from the ranks' step times,
  // with heartbeat_floor_s as its least value; "0" is off; seconds set a fixed limit. A rank
  // stopped by a signal is caught at once whatever this says.
  std::string heartbeat_timeout = "auto";
  double heartbeat_floor_s = 60;
  // Non-empty ("300M"): each rank in its own cgroup with this memory cap (launch/rank_cgroup.h).
  std::string rank_memory_max;
  // Inside a rank.
  std::string backend = "auto";  // auto | nccl | gloo
  bool sync_bn = false;
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  std::string grad_compression = "none";  // none | fp16 | bf16
  double timeout_s = 300;                 // a collective that takes longer fails the run
  // Sharded data parallel (shard_context.h): none | optimizer | gradients | full.
  std::string shard = "none";
  std::string shard_wrap = "auto";
  bool shard_keep_after_forward = false;  // full: keep units gathered from forward to backward
  bool say_hello = true;                  // "Hello from local_rank L, global_rank G"
};

// Registers --nproc_per_node, --nnodes, --node_rank, --master_addr, --master_port,
// --max_restarts, --heartbeat_timeout, --heartbeat_floor, --rank_memory_max, --backend, --sync_bn,
// --bucket_cap_mb,
// --grad_compression, --dist_timeout, --shard, --shard_wrap, --shard_keep_after_forward.
void add_dist_options(CLI::App* cmd, DistOptions& o, bool training = true);

// When this process was asked to start ranks (--nproc_per_node > 1 or --nnodes > 1) and is not
// itself a rank, runs the launcher over this same command line (each rank sees RANK and so
// does not launch again) and returns the launcher's exit code; otherwise nullopt.
// Under srun (a Slurm job step) the step decides: one rank per task, or one task per node
// that starts its node's ranks (launch/slurm_step.h), rendezvous on the step's first node.
std::optional<int> launch_if_needed(const DistOptions& o);

// The number of ranks the job will have: the launcher's WORLD_SIZE inside a rank, the Slurm
// step's layout under srun, else --nproc_per_node x --nnodes. Checked before any rank starts.
int planned_world_size(const DistOptions& o);

// The context for this process: single-process when no launcher set RANK/WORLD_SIZE (or the
// world has one rank), DDP otherwise; sharded (also for one rank) when --shard is not none. Prints
// the hello line, and "Auto-detected backend: gloo" on rank 0 for --backend auto. Throws
// gpulab::Exception when rendezvous fails.
DistContextPtr make_dist_context(const DistOptions& o);

// True in a rank the launcher restarted after a failure: the run should resume from its newest
// checkpoint (`gpulab train` sets --resume auto then).
bool restarted();

}  // namespace gpulab::train::dist
