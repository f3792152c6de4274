// Where this process sits in a distributed job (rank, local rank, world size, rendezvous address),
// read from whichever launcher started it: gpulab launch, torchrun, Slurm, OpenMPI or a Kubernetes
// PyTorchJob. No libtorch here: the launcher and the trainer both use it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "launch/env_lookup.h"

namespace gpulab::launch {

struct RankPlace {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Who set the environment: "single", "gpulab", "torchrun", "slurm", "openmpi", "pytorchjob",
  // "env" (RANK/WORLD_SIZE set by hand).
  std::string source = "single";
  int restart_count = 0;  // how often the launcher has restarted the group (resume if > 0)

  bool distributed() const { return world_size > 1; }
};

// Reads the place from the environment. A process that no launcher started is "single" (rank 0
// of 1). Inconsistent values (rank >= world size, a non-number) are an error naming the variable.
Result<RankPlace> detect_rank_place(const EnvLookup& env);

// The first host of a Slurm node list: "gpu[03-05,07],cpu1" -> "gpu03".
std::string first_slurm_host(std::string_view nodelist);

// Environment variables a launcher sets for its ranks (gpulab's and torchrun's names).
inline constexpr const char* kEnvErrorFile = "GPULAB_ERROR_FILE";
inline constexpr const char* kEnvNumThreads = "GPULAB_NUM_THREADS";
inline constexpr const char* kEnvRestartCount = "GPULAB_RESTART_COUNT";
inline constexpr const char* kEnvLauncher = "GPULAB_LAUNCHER";

// A rank that is about to fail writes the reason here, so the launcher's report can name it
// (a collective that timed out, say). Does nothing when no launcher asked for it.
void report_rank_error(std::string_view message);

}  // namespace gpulab::launch
