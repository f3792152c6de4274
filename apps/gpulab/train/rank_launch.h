// Whether a command that trains or times ranks (`gpulab train`, `gpulab bench train|allreduce`)
// runs here as it is, or re-executes itself as N ranks through the launcher.
#pragma once

#include <optional>

#include "train/dist/dist_options.h"

namespace gpulab::cli {

// When this process was asked to start ranks (--nproc_per_node > 1, --nnodes > 1 or
// --rank_memory_max) and is not itself a rank, runs the launcher over this same command line
// (each rank sees RANK and so does not launch again) and returns the launcher's exit code;
// otherwise nullopt. Under srun (a Slurm job step) the step decides: one rank per task, or one
// task per node that starts its node's ranks (launch/slurm_step.h), rendezvous on the step's
// first node.
std::optional<int> launch_if_needed(const train::dist::DistOptions& o);

// The number of ranks the job will have: the launcher's WORLD_SIZE inside a rank, the Slurm
// step's layout under srun, else --nproc_per_node x --nnodes. Checked before any rank starts.
int planned_world_size(const train::dist::DistOptions& o);

// Where those ranks go: ranks per node and nodes, from the same sources (a rank's
// LOCAL_WORLD_SIZE, the Slurm step's layout, else --nproc_per_node and --nnodes).
struct PlannedNodes {
  int ranks_per_node = 1;
  int nnodes = 1;
};
PlannedNodes planned_nodes(const train::dist::DistOptions& o);

}  // namespace gpulab::cli
