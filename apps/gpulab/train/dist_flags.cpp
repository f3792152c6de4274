// The DDP and sharding flags, registered once for every command that trains or times ranks.
#include "dist_flags.h"

#include <string>

#include "base/launch_flags.h"

namespace gpulab::cli {

void add_dist_flags(CLI::App* cmd, train::dist::DistOptions& o, bool training) {
  const std::string g = "Distributed";
  add_launch_flags(cmd, o.launch, training ? LaunchFlagSet::kAll : LaunchFlagSet::kRendezvous, g);
  cmd->add_option("--backend", o.backend, "auto, nccl (NCCL/RCCL on GPUs) or gloo (CPU)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--dist_timeout", o.timeout_s,
                  "seconds a collective may take before the run fails")
      ->group(g)
      ->capture_default_str();
  if (!training) return;
  cmd->add_flag("--sync_bn", o.sync_bn, "BatchNorm statistics over the global batch")->group(g);
  cmd->add_option("--bucket_cap_mb", o.bucket_cap_mb,
                  "gradient bucket size in MB (the first bucket is 1 MB)")
      ->group(g)
      ->capture_default_str();
  add_shard_flags(cmd, o, g);
  cmd->add_flag("--shard_keep_after_forward", o.shard_keep_after_forward,
                "--shard full: keep a unit gathered from its forward to its backward (faster, "
                "more memory)")
      ->group(g);
  cmd->add_option("--grad_compression", o.grad_compression,
                  "gradient all-reduce format: none, fp16 or bf16")
      ->group(g)
      ->capture_default_str();
}

void add_shard_flags(CLI::App* cmd, train::dist::DistOptions& o, const std::string& g) {
  cmd->add_option("--shard", o.shard,
                  "sharded data parallel: none (DDP), optimizer (ZeRO-1), gradients (ZeRO-2) or "
                  "full (ZeRO-3/FSDP)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--shard_wrap", o.shard_wrap,
                  "units of --shard: auto (transformer blocks, else residual stages, else "
                  "top-level children), blocks, children or none (one unit)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--shard_param_dtype", o.shard_param_dtype,
                  "--shard: dtype of the gathered parameters the model runs on: auto (bf16 under "
                  "--precision bf16, with fp32 master shards), fp32 or bf16")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--shard_reduce_dtype", o.shard_reduce_dtype,
                  "--shard: dtype gradients are reduce-scattered in: auto (the master shards', "
                  "fp32), fp32 or bf16 (half the bytes; summed in fp32)")
      ->group(g)
      ->capture_default_str();
}

}  // namespace gpulab::cli
