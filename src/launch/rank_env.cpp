// Rank detection: each launcher names the same facts differently; this maps them onto RankPlace.
#include "launch/rank_env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>

#include "launch/slurm_step.h"

namespace gpulab::launch {

namespace {

// Parses an integer variable; nullopt when unset, an error when set but not a number.
Result<std::optional<int>> get_int(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v) return std::optional<int>{};
  int out = 0;
  const char* b = v->data();
  const char* e = b + v->size();
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec != std::errc() || p != e) {
    return Error{Code::kInvalidArgument, name + "='" + *v + "' is not an integer",
                 "fix or unset " + name + " in the environment"};
  }
  return std::optional<int>{out};
}

std::string get_str(const EnvLookup& env, const std::string& name, std::string fallback) {
  auto v = env(name);
  return v && !v->empty() ? *v : fallback;
}

Status validate(const RankPlace& p) {
  if (p.world_size < 1 || p.rank < 0 || p.rank >= p.world_size) {
    return Error{Code::kInvalidArgument,
                 "rank " + std::to_string(p.rank) + " is outside world size " +
                     std::to_string(p.world_size) + " (from " + p.source + " environment)",
                 "check RANK/WORLD_SIZE or the launcher's equivalents"};
  }
  if (p.local_rank < 0 || p.local_world_size < 1 || p.local_rank >= p.local_world_size) {
    return Error{Code::kInvalidArgument,
                 "local rank " + std::to_string(p.local_rank) + " is outside local world size " +
                     std::to_string(p.local_world_size) + " (from " + p.source + " environment)"};
  }
  if (p.master_port < 1 || p.master_port > 65535) {
    return Error{Code::kInvalidArgument,
                 "master port " + std::to_string(p.master_port) + " is out of range 1..65535"};
  }
  return ok_status();
}

}  // namespace

std::string first_slurm_host(std::string_view list) {
  // Take the first comma-separated item outside brackets, then the first number of its range.
  std::string item;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    item.push_back(c);
  }
  auto open = item.find('[');
  if (open == std::string::npos) return item;
  std::string prefix = item.substr(0, open);
  std::string range = item.substr(open + 1);
  auto end = range.find_first_of(",-]");
  return prefix + range.substr(0, end);
}

#define GPULAB_GET(var, name)                \
  auto var##_r = get_int(env, name);         \
  if (!var##_r.ok()) return var##_r.error(); \
  std::optional<int> var = *var##_r;

namespace {

// An mpirun rank (OMPI_COMM_WORLD_*): its place, or why it cannot be found.
Status place_from_openmpi(const EnvLookup& env, int ompi_rank, const std::string& master_addr,
                          std::optional<int> master_port, RankPlace& p) {
  GPULAB_GET(size, "OMPI_COMM_WORLD_SIZE");
  GPULAB_GET(local_rank, "OMPI_COMM_WORLD_LOCAL_RANK");
  GPULAB_GET(local_size, "OMPI_COMM_WORLD_LOCAL_SIZE");
  GPULAB_GET(node, "OMPI_COMM_WORLD_NODE_RANK");
  p.source = "openmpi";
  p.rank = ompi_rank;
  p.world_size = size.value_or(1);
  p.local_rank = local_rank.value_or(0);
  p.local_world_size = local_size.value_or(1);
  p.node_rank = node.value_or(p.rank / p.local_world_size);
  if (master_addr.empty() && p.local_world_size < p.world_size) {
    return Error{Code::kInvalidArgument,
                 "OpenMPI job spans several nodes but MASTER_ADDR is not set",
                 "pass -x MASTER_ADDR=<rank 0's host> (and -x MASTER_PORT) to mpirun"};
  }
  p.master_addr = master_addr.empty() ? "127.0.0.1" : master_addr;
  p.master_port = master_port.value_or(29500);
  return ok_status();
}

}  // namespace

Result<RankPlace> detect_rank_place(const EnvLookup& env) {
  RankPlace p;

  GPULAB_GET(restarts, kEnvRestartCount);
  GPULAB_GET(torchelastic_restarts, "TORCHELASTIC_RESTART_COUNT");
  p.restart_count = restarts.value_or(torchelastic_restarts.value_or(0));

  GPULAB_GET(rank, "RANK");
  GPULAB_GET(world, "WORLD_SIZE");
  GPULAB_GET(ompi_rank, "OMPI_COMM_WORLD_RANK");
  GPULAB_GET(slurm_rank, "SLURM_PROCID");
  GPULAB_GET(master_port, "MASTER_PORT");
  std::string master_addr = get_str(env, "MASTER_ADDR", "");

  if (rank && world) {
    // gpulab launch, torchrun, a PyTorchJob pod, or a user: all use torchrun's names.
    GPULAB_GET(local_rank, "LOCAL_RANK");
    GPULAB_GET(local_world, "LOCAL_WORLD_SIZE");
    GPULAB_GET(group_rank, "GROUP_RANK");
    p.rank = *rank;
    p.world_size = *world;
    if (env(kEnvLauncher)) {
      p.source = "gpulab";
    } else if (env("TORCHELASTIC_RUN_ID") || group_rank) {
      p.source = "torchrun";
    } else if (env("PET_NNODES") || env("PYTORCHJOB_NAME") || !local_rank) {
      // A PyTorchJob pod without torchrun runs one process per pod: RANK is the pod's index.
      p.source = env("PET_NNODES") || env("PYTORCHJOB_NAME") ? "pytorchjob" : "env";
    } else {
      p.source = "env";
    }
    p.local_rank = local_rank.value_or(0);
    p.local_world_size = local_world.value_or(local_rank ? p.world_size : 1);
    p.node_rank = group_rank.value_or(p.rank / p.local_world_size);
    p.master_addr = master_addr.empty() ? "127.0.0.1" : master_addr;
    p.master_port = master_port.value_or(29500);
  } else if (ompi_rank) {
    if (auto s = place_from_openmpi(env, *ompi_rank, master_addr, master_port, p); !s.ok())
      return s.error();
  } else if (slurm_rank) {
    // Inside an srun step (outside one, in the batch script, this is one process).
    auto step = read_slurm_step(env);
    if (!step.ok()) return step.error();
    if (*step) {
      const SlurmStep& st = **step;
      p.source = "slurm";
      p.rank = st.procid;
      p.world_size = st.ntasks;
      p.local_rank = st.localid;
      p.local_world_size = std::max(st.tasks_on_this_node(), p.local_rank + 1);
      p.node_rank = st.nodeid;
      p.master_addr = master_addr.empty() ? st.first_node() : master_addr;
      p.master_port = master_port.value_or(slurm_master_port(st.job_id, st.step_id));
    }
  }
  // A requeued Slurm job (sbatch --requeue) runs again from its newest checkpoint.
  GPULAB_GET(slurm_restarts, "SLURM_RESTART_COUNT");
  p.restart_count += slurm_restarts.value_or(0);
#undef GPULAB_GET
  if (auto s = validate(p); !s.ok()) return s.error();
  return p;
}

void report_rank_error(std::string_view message) {
  const char* path = std::getenv(kEnvErrorFile);
  if (!path || !*path) return;
  std::ofstream out(path, std::ios::trunc);
  out << message;
}

}  // namespace gpulab::launch
