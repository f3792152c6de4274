// The DDP options of `gpulab train` (and `gpulab bench`) in one struct, their validation, and
// what a rank needs from them: the distributed context, and whether it was restarted. The flag
// table is apps/gpulab/train/dist_flags.cpp; starting the ranks is
// apps/gpulab/train/rank_launch.cpp.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "launch/launch_flags.h"
#include "train/dist/communicator.h"
#include "train/dist_hooks.h"

namespace gpulab::train::dist {

struct DistOptions {
  // Launching (this node's share of the job): --nproc_per_node ... --rank_memory_max.
  launch::LaunchFlags launch;
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
  bool shard_keep_after_forward = false;   // full: keep units gathered from forward to backward
  std::string shard_param_dtype = "auto";  // shard_precision.h: auto | fp32 | bf16
  std::string shard_reduce_dtype = "auto";
  // The job's --precision (the command copies it here before validate): what "auto" means above.
  std::string precision = "fp32";
  // The job's --tp (copied here too): above 1, a device mesh (train/parallel/tp_context.h).
  int tp = 1;
  // The job's --pp (copied too): above 1, a device mesh (train/parallel/pipeline_context.h).
  int pp = 1;
  // --tp given, even as 1: the device mesh and the tensor-parallel model at any size (tp 1 is
  // the mesh's degenerate case, every TP collective over a group of one: a smoke test of the
  // path, e.g. on one GPU).
  bool tp_mesh = false;
  bool say_hello = true;  // "Hello from local_rank L, global_rank G"
};

// Every value in range and every name known (the launch flags included): kInvalidArgument
// naming the flag, with the valid values as the hint. Checked once, before any rank starts.
Status validate(const DistOptions& o);

// The context for this process: single-process when no launcher set RANK/WORLD_SIZE (or the
// world has one rank), DDP otherwise; sharded (also for one rank) when --shard is not none;
// tensor parallel (a device mesh) when tp > 1. Prints
// the hello line, and "Auto-detected backend: gloo" on rank 0 for --backend auto. Throws
// gpulab::Exception when rendezvous fails. With `group` (a group of the world, e.g. GRPO's
// training ranks beside its generation ranks): DDP or sharded over that group's ranks.
DistContextPtr make_dist_context(const DistOptions& o,
                                 std::shared_ptr<Communicator> group = nullptr);

// True in a rank the launcher restarted after a failure: the run should resume from its newest
// checkpoint (`gpulab train` sets --resume auto then).
bool restarted();

}  // namespace gpulab::train::dist
