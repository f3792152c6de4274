// The Slurm options shared by `gpulab slurm` and `gpulab ddp --scheduler slurm`, and the one
// function both call to write, print, test or submit the sbatch script (launch/slurm_script.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "launch/slurm_script.h"

namespace gpulab::cli {

struct SlurmCliOptions {
  std::string scheduler = "local";  // gpulab ddp only: local (the seed's containers) | slurm
  launch::SlurmJobRequest job;
  std::string container = "auto";
  bool dry_run = false;    // print the script
  bool test_only = false;  // sbatch --test-only
  bool no_requeue = false;
  std::string status, logs, cancel;  // a job id: its lifecycle instead of a submission
};

// Registers the job options on `cmd`. for_ddp: `gpulab ddp` has --image and --nnodes already
// (they are read from its own options), and gets --scheduler.
void add_slurm_job_options(CLI::App* cmd, SlurmCliOptions& o, bool for_ddp);

// --image, as `gpulab ddp` and `gpulab slurm submit` both take it.
CLI::Option* add_image_flag(CLI::App* cmd, std::string& image);

// --status/--logs/--cancel JOB when one is given, else the script for `gpus_per_node` GPUs on
// `nodes` nodes with `train_flags`: printed (--dry-run), tested (--test-only) or submitted.
// Returns the exit code; errors are thrown as gpulab::Exception.
int run_slurm(SlurmCliOptions o, int gpus_per_node, int nodes, const std::string& train_flags);

// The seed's positional form, N [script_multi_node|script_single_node] [auto] [MASTER_ADDR]
// ["train flags"], on `nodes` nodes (nodes_need_multi: only with script_multi_node, as
// `gpulab ddp --nnodes` is); --status/--logs/--cancel need none of it. The master address is not
// used: the allocation's first node hosts the rendezvous.
int run_slurm_seed_args(const SlurmCliOptions& o, const std::vector<std::string>& args, int nodes,
                        bool nodes_need_multi);

}  // namespace gpulab::cli
