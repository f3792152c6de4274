// What the launcher watches a group of ranks for: when a quiet rank counts as hung (the hang
// policy), and the failure that stops the group. Shared by launcher.h and rank_group.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

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

}  // namespace gpulab::launch
