// The process launcher behind `gpulab launch` and `gpulab train --nproc_per_node`: starts the
// ranks of one node in their own process group with the rendezvous environment, watches them,
// stops all of them within seconds when one fails, and restarts the group if asked to.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "launch/rank_watch.h"

namespace gpulab::launch {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // empty: 127.0.0.1 (one node only)
  int master_port = 0;      // 0: a free port on one node, 29500 on several
  int max_restarts = 0;     // restarts of the whole group after a failure
  std::vector<std::string> command;
  int threads_per_rank = 0;  // 0: this host's cores split between the local ranks
  // SIGTERM first, SIGKILL after this: ranks stopped well inside the 10 s budget.
  std::chrono::milliseconds stop_grace{3000};
  HangPolicy hang;                         // when a rank whose heartbeat went quiet is hung
  std::map<std::string, std::string> env;  // added to every rank's environment
  bool verbose = true;                     // launcher status lines on stderr
  // > 0: each rank runs in its own cgroup with this memory cap (--rank_memory_max,
  // rank_cgroup.h); checked before any rank starts.
  int64_t rank_memory_max_bytes = 0;
};

struct LaunchResult {
  // 0, the failed rank's code, 128+signal (killed or stopped), 124 (hung), or 128+the signal
  // that stopped the launcher.
  int exit_code = 0;
  int restarts = 0;                    // restarts performed
  std::optional<RankFailure> failure;  // the last failure, if the job did not succeed
  std::string message;                 // one line for the user when exit_code != 0
  // The launcher itself got SIGINT/SIGTERM/SIGHUP and stopped the ranks on purpose: a stop the
  // user asked for, said as a note, not an error (the ranks say where they stopped).
  bool stopped_by_signal = false;
  // With --rank_memory_max: the highest memory use of each rank's cgroup in the last attempt,
  // where the kernel reports it.
  std::map<int, int64_t> rank_peak_bytes;
};

// Runs the job to completion. Fails (Result error) only on bad options or when nothing could
// be started; rank failures are reported in LaunchResult.
Result<LaunchResult> run_launch(const LaunchOptions& opts);

// Cores this process may use (its affinity mask), at least 1.
int available_cores();

// The current program's own command line (from /proc/self/cmdline): used to relaunch
// `gpulab train` as its own ranks.
std::vector<std::string> self_command_line();

}  // namespace gpulab::launch
