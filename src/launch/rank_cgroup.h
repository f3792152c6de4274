// Per-rank memory caps (--rank_memory_max): each rank runs in its own child cgroup of the
// launcher's cgroup with a memory limit the kernel enforces, so a rank that outgrows it is ended
// by the OOM killer and the launcher can say which rank hit which cap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::launch {

// "300M", "300MiB", "1.5G", "268435456" (bytes) -> bytes, binary units (K, M, G, T). An error
// below 16 MiB (no rank of a C++ program with libtorch starts in less) or above 64 TiB.
Result<int64_t> parse_memory_size(const std::string& text);
// "300 MiB", "1.5 GiB".
std::string format_mib(int64_t bytes);

// The rank cgroups of one launcher: <launcher's cgroup>/gpulab-launch-<pid>/rank<N>.
// cgroup v2 (memory.max, memory.swap.max = 0) where the memory controller is on the unified
// hierarchy; else a v1 memory hierarchy (memory.limit_in_bytes, and memory.memsw.limit_in_bytes
// where swap accounting is on), as on hosts that still mount cgroups in hybrid mode.
class RankCgroups {
 public:
  // Finds this process's memory controller, checks that it can create cgroups there, and
  // creates the launcher's folder. kUnavailable, saying why, where neither version can be used.
  static Result<std::unique_ptr<RankCgroups>> create(int64_t max_bytes);
  RankCgroups(const RankCgroups&) = delete;
  RankCgroups& operator=(const RankCgroups&) = delete;
  ~RankCgroups();  // removes every rank cgroup and the launcher's folder

  // A fresh cgroup for `rank` with the cap (the previous attempt's removed first). Returns the
  // path of its cgroup.procs: the rank's process writes "0" there between fork and exec, so
  // everything it allocates is charged to its own cgroup.
  Result<std::string> prepare(int rank);
  // Removes the rank's cgroup; its processes must have ended.
  void release(int rank);

  // How many processes the kernel's OOM killer ended in the rank's cgroup so far.
  int64_t oom_kills(int rank) const;
  // The highest memory use the rank's cgroup reached, where the kernel keeps it (v1, v2 from
  // Linux 5.19).
  std::optional<int64_t> peak_bytes(int rank) const;

  int64_t max_bytes() const { return max_bytes_; }
  // "cgroup v1 memory controller under /sys/fs/cgroup/memory/..." for the launcher's line.
  std::string describe() const;

 private:
  RankCgroups() = default;
  std::string rank_dir(int rank) const;
  int enable_from_leaf(const std::string& base, const std::string& subtree,
                       std::vector<std::string>& reasons);

  int version_ = 2;
  int64_t max_bytes_ = 0;
  std::string base_;    // the launcher's own cgroup (a folder in the mounted hierarchy)
  std::string launch_;  // base_/gpulab-launch-<pid>
  // v2 only: where the launcher had to move itself to a leaf so that its cgroup could hand the
  // memory controller to its children (the "no internal processes" rule), undone at the end.
  std::string leaf_;
  bool enabled_memory_ = false;
};

}  // namespace gpulab::launch
