// Self-launch as N ranks: the launcher over this process's own command line, or nothing when
// this process is a rank already (or runs alone).
#include "rank_launch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "launch/launch_flags.h"
#include "launch/launcher.h"
#include "launch/rank_env.h"
#include "launch/slurm_step.h"

namespace gpulab::cli {

std::optional<int> launch_if_needed(const train::dist::DistOptions& o) {
  auto env = launch::process_env();
  if (env("RANK") && env("WORLD_SIZE")) return std::nullopt;  // we are a rank already
  const launch::LaunchFlags& f = o.launch;
  launch::LaunchOptions lo = launch::to_launch_options(f).value_or_throw();
  // Under srun the step says where every rank goes (launch/slurm_step.h).
  if (auto step = launch::read_slurm_step(env).value_or_throw()) {
    auto plan = launch::plan_slurm(*step, f.nproc_per_node).value_or_throw();
    if (step->procid == 0) {
      std::printf("Slurm job %lld step %lld: %s\n", step->job_id, step->step_id,
                  plan.describe().c_str());
      std::fflush(stdout);
    }
    if (!plan.launcher_per_node) {
      // This task is a rank: srun placed it, so the launcher's cgroups cannot hold it.
      if (!f.rank_memory_max.empty())
        throw Exception(Code::kInvalidArgument,
                        "--rank_memory_max needs gpulab's launcher, and srun starts the ranks "
                        "of this step itself",
                        "use Slurm's own cap (srun --mem-per-cpu), or one task per node");
      return std::nullopt;
    }
    lo.nproc_per_node = plan.nproc_per_node;
    lo.nnodes = plan.nnodes;
    lo.node_rank = plan.node_rank;
    lo.master_addr = f.master_addr.empty() ? plan.master_addr : f.master_addr;
    lo.master_port = f.master_port ? f.master_port : plan.master_port;
  } else if (f.nproc_per_node <= 1 && f.nnodes <= 1 && f.rank_memory_max.empty()) {
    return std::nullopt;  // one process, no cap: no launcher (a capped one runs as rank 0 of 1)
  }
  lo.command = launch::self_command_line();
  auto r = launch::run_launch(lo).value_or_throw();
  // A Ctrl-C stop: the ranks already said where they stopped and how to resume.
  if (r.exit_code != 0 && !r.stopped_by_signal) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", r.message.c_str());
  }
  return r.exit_code;
}

int planned_world_size(const train::dist::DistOptions& o) {
  auto env = launch::process_env();
  if (auto w = env("WORLD_SIZE"); w && env("RANK")) return std::max(1, std::atoi(w->c_str()));
  if (auto step = launch::read_slurm_step(env).value_or_throw())
    return launch::plan_slurm(*step, o.launch.nproc_per_node).value_or_throw().world_size;
  return o.launch.nproc_per_node * o.launch.nnodes;
}

PlannedNodes planned_nodes(const train::dist::DistOptions& o) {
  auto env = launch::process_env();
  const int world = planned_world_size(o);
  if (auto local = env("LOCAL_WORLD_SIZE"); local && env("RANK")) {
    const int per_node = std::max(1, std::atoi(local->c_str()));
    return {per_node, std::max(1, world / per_node)};
  }
  if (auto step = launch::read_slurm_step(env).value_or_throw()) {
    auto plan = launch::plan_slurm(*step, o.launch.nproc_per_node).value_or_throw();
    return {plan.nproc_per_node, plan.nnodes};
  }
  return {o.launch.nproc_per_node, o.launch.nnodes};
}

}  // namespace gpulab::cli
