// DDP flags, self-launch through the launcher, and context construction from the environment.
#include "train/dist/dist_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "launch/launcher.h"
#include "launch/ports.h"
#include "launch/rank_cgroup.h"
#include "launch/rank_env.h"
#include "launch/slurm_step.h"
#include "train/dist/ddp_context.h"
#include "train/dist/shard_context.h"

namespace gpulab::train::dist {

void add_dist_options(CLI::App* cmd, DistOptions& o, bool training) {
  const std::string g = "Distributed";
  cmd->add_option("--nproc_per_node", o.nproc_per_node,
                  "ranks to start on this node (one GPU each, or a share of the CPU cores)")
      ->check(CLI::Range(1, 1024))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--nnodes", o.nnodes, "nodes in the job")
      ->check(CLI::Range(1, 65536))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--node_rank", o.node_rank, "this node's index (0 hosts the rendezvous)")
      ->check(CLI::Range(0, 65535))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--master_addr", o.master_addr, "address of node 0 (default 127.0.0.1)")
      ->group(g);
  cmd->add_option("--master_port", o.master_port,
                  "rendezvous port (default: free port on one node, 29500 on several)")
      ->check(CLI::Range(0, 65535))
      ->group(g);
  cmd->add_option("--backend", o.backend, "auto, nccl (NCCL/RCCL on GPUs) or gloo (CPU)")
      ->check(CLI::IsMember({"auto", "nccl", "gloo"}))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--dist_timeout", o.timeout_s,
                  "seconds a collective may take before the run fails")
      ->check(CLI::Range(1.0, 86400.0))
      ->group(g)
      ->capture_default_str();
  if (!training) return;
  cmd->add_option("--max_restarts", o.max_restarts,
                  "restart all ranks from the newest checkpoint after a failure, K times")
      ->check(CLI::Range(0, 1000))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--heartbeat_timeout", o.heartbeat_timeout,
                  "when a rank that runs but makes no progress (a training or evaluation batch, "
                  "a collective) is hung and the job stopped: auto (a rank silent for longer "
                  "than 10 x the slowest step or evaluation batch seen, and at least "
                  "--heartbeat_floor, once it has done a few steps), seconds (a fixed limit), "
                  "or 0 (off)")
      ->check([](const std::string& v) { return launch::heartbeat_timeout_error(v); })
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--heartbeat_floor", o.heartbeat_floor_s,
                  "seconds of silence that --heartbeat_timeout auto always allows (raise it "
                  "when checkpoints take longer to write)")
      ->check(CLI::Range(0.1, 86400.0))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--rank_memory_max", o.rank_memory_max,
                  "memory cap of each rank (e.g. 300M, 2G): every rank runs in its own cgroup "
                  "(v2, else v1 memory controller) and one that outgrows it is ended by the "
                  "kernel's OOM killer, which the launcher reports (even with one rank)")
      ->check([](const std::string& v) { return launch::memory_size_error(v); })
      ->group(g);
  cmd->add_flag("--sync_bn", o.sync_bn, "BatchNorm statistics over the global batch")->group(g);
  cmd->add_option("--bucket_cap_mb", o.bucket_cap_mb,
                  "gradient bucket size in MB (the first bucket is 1 MB)")
      ->check(CLI::Range(0.001, 4096.0))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--shard", o.shard,
                  "sharded data parallel: none (DDP), optimizer (ZeRO-1), gradients (ZeRO-2) or "
                  "full (ZeRO-3/FSDP)")
      ->check(CLI::IsMember({"none", "optimizer", "gradients", "full"}))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--shard_wrap", o.shard_wrap,
                  "units of --shard: auto (transformer blocks, else residual stages, else "
                  "top-level children), blocks, children or none (one unit)")
      ->check(CLI::IsMember({"auto", "blocks", "children", "none"}))
      ->group(g)
      ->capture_default_str();
  cmd->add_flag("--shard_keep_after_forward", o.shard_keep_after_forward,
                "--shard full: keep a unit gathered from its forward to its backward (faster, "
                "more memory)")
      ->group(g);
  cmd->add_option("--grad_compression", o.grad_compression,
                  "gradient all-reduce format: none, fp16 or bf16")
      ->check(CLI::IsMember({"none", "fp16", "bf16"}))
      ->group(g)
      ->capture_default_str();
}

std::optional<int> launch_if_needed(const DistOptions& o) {
  auto env = launch::process_env();
  if (env("RANK") && env("WORLD_SIZE")) return std::nullopt;  // we are a rank already
  launch::LaunchOptions lo;
  lo.nproc_per_node = o.nproc_per_node;
  lo.nnodes = o.nnodes;
  lo.node_rank = o.node_rank;
  lo.master_addr = o.master_addr;
  lo.master_port = o.master_port;
  // Under srun the step says where every rank goes (launch/slurm_step.h).
  if (auto step = launch::read_slurm_step(env).value_or_throw()) {
    auto plan = launch::plan_slurm(*step, o.nproc_per_node).value_or_throw();
    if (step->procid == 0) {
      std::printf("Slurm job %lld step %lld: %s\n", step->job_id, step->step_id,
                  plan.describe().c_str());
      std::fflush(stdout);
    }
    if (!plan.launcher_per_node) {
      // This task is a rank: srun placed it, so the launcher's cgroups cannot hold it.
      if (!o.rank_memory_max.empty())
        throw Exception(Code::kInvalidArgument,
                        "--rank_memory_max needs gpulab's launcher, and srun starts the ranks "
                        "of this step itself",
                        "use Slurm's own cap (srun --mem-per-cpu), or one task per node");
      return std::nullopt;
    }
    lo.nproc_per_node = plan.nproc_per_node;
    lo.nnodes = plan.nnodes;
    lo.node_rank = plan.node_rank;
    lo.master_addr = o.master_addr.empty() ? plan.master_addr : o.master_addr;
    lo.master_port = o.master_port ? o.master_port : plan.master_port;
  } else if (o.nproc_per_node <= 1 && o.nnodes <= 1 && o.rank_memory_max.empty()) {
    return std::nullopt;  // one process, no cap: no launcher (a capped one runs as rank 0 of 1)
  }
  if (!o.rank_memory_max.empty())
    lo.rank_memory_max_bytes = launch::parse_memory_size(o.rank_memory_max).value_or_throw();
  lo.max_restarts = o.max_restarts;
  lo.hang =
      launch::hang_policy_from_flags(o.heartbeat_timeout, o.heartbeat_floor_s).value_or_throw();
  lo.command = launch::self_command_line();
  auto r = launch::run_launch(lo).value_or_throw();
  if (r.exit_code != 0) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", r.message.c_str());
  }
  return r.exit_code;
}

int planned_world_size(const DistOptions& o) {
  auto env = launch::process_env();
  if (auto w = env("WORLD_SIZE"); w && env("RANK")) return std::max(1, std::atoi(w->c_str()));
  if (auto step = launch::read_slurm_step(env).value_or_throw())
    return launch::plan_slurm(*step, o.nproc_per_node).value_or_throw().world_size;
  return o.nproc_per_node * o.nnodes;
}

bool restarted() {
  auto place = launch::detect_rank_place(launch::process_env());
  return place.ok() && place->restart_count > 0;
}

namespace {

DdpOptions ddp_options(const DistOptions& o) {
  DdpOptions d;
  d.comm.backend = o.backend;
  d.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  d.reducer.bucket_cap_mb = o.bucket_cap_mb;
  d.reducer.first_bucket_mb = o.first_bucket_mb;
  d.reducer.compression = o.grad_compression;
  d.sync_bn = o.sync_bn;
  return d;
}

}  // namespace

DistContextPtr make_dist_context(const DistOptions& o) {
  auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
  DistContextPtr ctx;
  if (o.shard != "none") {
    ShardContextOptions so;
    so.ddp = ddp_options(o);
    so.shard.stage = parse_shard_stage(o.shard);
    so.shard.wrap = o.shard_wrap;
    so.shard.reshard_after_forward = !o.shard_keep_after_forward;
    if (!place.distributed()) {
      // One rank still runs every collective and hook (a world of one).
      place.master_addr = "127.0.0.1";
      place.master_port = launch::pick_free_port().value_or_throw();
      so.ddp.comm.print_auto = false;
    }
    ctx = std::make_shared<ShardContext>(place, so);
  } else if (!place.distributed()) {
    if (o.backend == "nccl" || o.backend == "gloo") (void)resolve_backend(o.backend);
    ctx = single_process_context();
    ctx->local_rank = place.local_rank;
  } else {
    ctx = std::make_shared<DdpContext>(place, ddp_options(o));
  }
  if (o.say_hello) {
    std::printf("Hello from local_rank %d, global_rank %d\n", place.local_rank, place.rank);
    std::fflush(stdout);
  }
  return ctx;
}

}  // namespace gpulab::train::dist
