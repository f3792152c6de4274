// gpulab under `srun`: what Slurm tells a task about its job step (SLURM_* variables), and how
// the ranks are laid out from it: one rank per task (srun --ntasks-per-node=G), or one task per
// node that starts its node's ranks itself (srun --ntasks-per-node=1 with G GPUs on the node).
// Rendezvous is on the step's first node; nothing is passed by hand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "launch/env_lookup.h"

namespace gpulab::launch {

struct SlurmStep {
  long long job_id = 0;
  long long step_id = 0;
  int procid = 0;  // this task's global index
  int ntasks = 1;  // tasks in the step
  int localid = 0;
  int nodeid = 0;                   // this node's index in the step
  std::vector<std::string> nodes;   // the step's hosts, in order
  std::vector<int> tasks_per_node;  // one entry per node of the step
  std::vector<std::string>
      gpus;               // GPUs this task may use (SLURM_STEP_GPUS, else *_VISIBLE_DEVICES)
  int restart_count = 0;  // SLURM_RESTART_COUNT: a requeued job's run
  std::string node_name;  // SLURMD_NODENAME: this node as Slurm calls it

  int nnodes() const { return static_cast<int>(nodes.size()); }
  int tasks_on_this_node() const;
  const std::string& first_node() const { return nodes.front(); }
};

// The step this process runs in, or nullopt outside one (no SLURM_PROCID, or the batch script,
// which is no step). An error for malformed variables.
Result<std::optional<SlurmStep>> read_slurm_step(const EnvLookup& env);

// SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: "2(x3),1" -> 2 2 2 1.
Result<std::vector<int>> parse_tasks_per_node(const std::string& text);

// The rendezvous port of a step: the same on every task of it, different for two steps or two
// jobs sharing a node (a requeued job keeps its id, and so its port).
int slurm_master_port(long long job_id, long long step_id);

struct SlurmPlan {
  bool launcher_per_node = false;  // this task starts nproc_per_node ranks
  int nproc_per_node = 1;          // ranks on this node
  int nnodes = 1;
  int node_rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::string describe() const;  // "4 ranks, 2 per node on 2 nodes (one per task), master ..."
};

// How this step's ranks are laid out. `requested` is --nproc_per_node (1: decide from the GPUs
// on the node). Several tasks on a node each run one rank; a single task on a node starts
// `requested`, else one rank per GPU it was given. Asking several tasks to each start several
// ranks is an error.
Result<SlurmPlan> plan_slurm(const SlurmStep& step, int requested);

}  // namespace gpulab::launch
