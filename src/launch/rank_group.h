// One attempt of a node's ranks: spawned together in a fresh process group (so grandchildren
// are stopped too), each set to die with the launcher, reaped and stopped as a unit.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "launch/heartbeat.h"
#include "launch/rank_watch.h"

namespace gpulab::launch {

struct RankSpec {
  int rank = 0;
  int local_rank = 0;
  std::map<std::string, std::string> env;  // set on top of the launcher's environment
  std::string error_file;
  std::string heartbeat_file;  // empty: not watched
  // Non-empty: the cgroup.procs of the rank's own cgroup (rank_cgroup.h), joined between fork
  // and exec so that all the rank allocates counts against its cap.
  std::string cgroup_procs;
};

class RankGroup {
 public:
  RankGroup() = default;
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;
  ~RankGroup();  // kills and reaps whatever is still running

  // Forks and execs `command` once per spec. On error, ranks already started are stopped.
  Status start(const std::vector<std::string>& command, const std::vector<RankSpec>& specs);

  // Waits up to `timeout` for ranks to end. Returns the first failure among the ranks that
  // ended (a signal beats an exit code when several end together: the signal is the cause, the
  // exits its echo), or nullopt. done() tells whether all have ended.
  std::optional<RankFailure> poll(std::chrono::milliseconds timeout);
  bool done() const { return alive_ == 0; }
  // A rank whose heartbeat is older than the policy's limit (the oldest such rank), or nullopt.
  // The report says the limit and adds where the other ranks are waiting.
  std::optional<RankFailure> check_progress(const HangPolicy& policy);

  // `sig` (SIGTERM, or the user's SIGINT the launcher passes on) to the whole group, SIGKILL
  // after `grace`, and reap every rank. One signal only: a rank names its stop after it.
  // Returns how many ranks were still running when the grace ran out (and were killed).
  int stop(std::chrono::milliseconds grace, int sig = SIGTERM);

 private:
  struct Proc {
    RankSpec spec;
    pid_t pid = -1;
    bool running = false;
    std::optional<Beat> beat;  // the last heartbeat read, whose text an empty file keeps
  };
  std::optional<Beat> read_beat(Proc& p);
  std::optional<RankFailure> reap(bool blocking, bool record);

  std::vector<Proc> procs_;
  pid_t pgid_ = -1;
  int alive_ = 0;
  double slowest_phase_s_ = 0;  // the longest phase any rank of this group has reported
};

}  // namespace gpulab::launch
