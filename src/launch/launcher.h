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

namespace gpulab::launch {

// When a rank that still runs but makes no progress is hung (its heartbeat, launch/heartbeat.h,
// is older than a limit): the group is then stopped. A rank stopped by a signal (SIGSTOP) is
// caught at once whatever this says.
struct HangPolicy {
  // > 0: a fixed limit, watched from a rank's first beat (--heartbeat_timeout S).
  std::chrono::milliseconds fixed{0};
  // With no fixed limit: learn it (--heartbeat_timeout auto). A rank is watched once it has
  // passed `warmup` progress points (its first steps, which include one-time set-up, are timed
  // but not judged), and is hung when silent for longer than max(floor, factor x the slowest
  // phase between two progress points that any rank has reported). false: no hang detection
  // (--heartbeat_timeout 0).
  bool adaptive = false;
  std::chrono::milliseconds floor{60000};
  double factor = 10;
  int64_t warmup = 4;

  bool off() const { return fixed.count() <= 0 && !adaptive; }
  // The limit given the slowest phase seen so far, and how it was found, for the message.
  std::chrono::milliseconds limit(double slowest_phase_s) const;
  std::string explain(double slowest_phase_s) const;
};

// --heartbeat_timeout ("auto", 0 for off, or seconds) and --heartbeat_floor (seconds) as a
// policy; an error for anything else.
Result<HangPolicy> hang_policy_from_flags(const std::string& timeout, double floor_s);

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

// Why the group stopped: the first rank that failed, as the launcher saw it.
struct RankFailure {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  int exit_code = 0;          // when it exited
  int signal = 0;             // when a signal ended it
  int stopped_by = 0;         // when a signal (SIGSTOP, SIGTSTP) stopped it: it hangs its peers
  double silent_s = 0;        // when its heartbeat went quiet for longer than the limit
  std::string limit;          // that limit and where it came from ("limit 6.0 s = 10 x ...")
  std::string last_progress;  // its last heartbeat record, when known
  std::string error;          // what the rank wrote to its error file, if anything
  int64_t oom_cap_bytes = 0;  // the OOM killer acted in its cgroup at this --rank_memory_max cap
  // "rank 1 (pid 4242) was killed by signal 9 (SIGKILL)" [+ ": out of memory: ... cap of
  // 300 MiB"] [+ ": <error>"], "... was stopped by signal 19 (SIGSTOP)", "... hangs: no progress
  // for 6.1 s (limit ...) (last progress: ...)".
  std::string describe() const;
  // The rank exited with code 2 after writing "error: ..." to its error file: bad input that
  // every rank shares (a missing data set), said once by the launcher and never restarted.
  bool reported_bad_input() const;
};

struct LaunchResult {
  // 0, the failed rank's code, 128+signal (killed or stopped), 124 (hung), or 128+the signal
  // that stopped the launcher.
  int exit_code = 0;
  int restarts = 0;                    // restarts performed
  std::optional<RankFailure> failure;  // the last failure, if the job did not succeed
  std::string message;                 // one line for the user when exit_code != 0
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
