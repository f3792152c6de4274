// The hang policy's limit and wording, its flags, and how a rank failure is said.
#include "launch/rank_watch.h"

#include <algorithm>
#include <cstdio>

#include "core/signal_name.h"
#include "core/strings.h"
#include "launch/rank_cgroup.h"

namespace gpulab::launch {

std::chrono::milliseconds HangPolicy::limit(double slowest_phase_s) const {
  if (fixed.count() > 0) return fixed;
  const auto learned =
      std::chrono::milliseconds(static_cast<int64_t>(factor * slowest_phase_s * 1000.0));
  return std::max(floor, learned);
}

std::string HangPolicy::explain(double slowest_phase_s) const {
  char buf[160];
  const double limit_s = static_cast<double>(limit(slowest_phase_s).count()) / 1000.0;
  if (fixed.count() > 0) {
    std::snprintf(buf, sizeof buf, "limit %.1f s, --heartbeat_timeout", limit_s);
  } else if (limit(slowest_phase_s) > floor) {
    std::snprintf(buf, sizeof buf, "limit %.1f s = %g x the slowest phase so far, %.2f s", limit_s,
                  factor, slowest_phase_s);
  } else {
    std::snprintf(buf, sizeof buf,
                  "limit %.1f s, the --heartbeat_floor; the slowest phase so far took %.2f s",
                  limit_s, slowest_phase_s);
  }
  return buf;
}

Result<HangPolicy> hang_policy_from_flags(const std::string& timeout, double floor_s) {
  HangPolicy p;
  if (!(floor_s > 0)) {
    return Error{Code::kInvalidArgument, "--heartbeat_floor must be above 0 seconds"};
  }
  p.floor = std::chrono::milliseconds(static_cast<int64_t>(floor_s * 1000.0));
  if (timeout == "auto") {
    p.adaptive = true;
    return p;
  }
  const double s = parse_double(timeout).value_or(-1);
  if (!(s >= 0) || s > 86400) {
    return Error{Code::kInvalidArgument,
                 "--heartbeat_timeout " + timeout + " is neither auto nor 0..86400 seconds",
                 "auto learns the limit from the ranks' step times; 0 turns hang detection off"};
  }
  p.fixed = std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
  return p;
}

std::string RankFailure::describe() const {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (signal) {
    s += " was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  } else if (stopped_by) {
    s += " was stopped by signal " + std::to_string(stopped_by) + " (" + signal_name(stopped_by) +
         ") and hangs the job";
  } else if (silent_s > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", silent_s);
    s += std::string(" hangs: no progress for ") + buf + " s";
    if (!limit.empty()) s += " (" + limit + ")";
  } else {
    s += " exited with code " + std::to_string(exit_code);
  }
  if (oom_cap_bytes > 0)
    s += ": out of memory: the kernel's OOM killer acted at its --rank_memory_max cap of " +
         format_mib(oom_cap_bytes);
  if (!last_progress.empty()) s += " (last progress: " + last_progress + ")";
  if (!error.empty()) s += ": " + error;
  return s;
}

bool RankFailure::reported_bad_input() const {
  return exit_code == 2 && signal == 0 && stopped_by == 0 && silent_s == 0 &&
         error.rfind("error: ", 0) == 0;
}

}  // namespace gpulab::launch
