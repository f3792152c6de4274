// --rank_memory_max with real rank processes in real cgroups: the size flag, a rank that
// outgrows its cap reported by rank and cap, ranks within it finishing with their peaks, and no
// cgroup left behind. Skipped, with the reason, where no cgroup memory controller is writable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "launch/launcher.h"
#include "launch/rank_cgroup.h"

using namespace gpulab;
using namespace gpulab::launch;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kMiB = 1 << 20;

// Why the cap cannot be used here, or empty.
std::string unavailable_reason() {
  auto cg = RankCgroups::create(64 * kMiB);
  return cg.ok() ? std::string() : cg.error().message;
}

LaunchOptions sh(int n, const std::string& script, int64_t cap) {
  LaunchOptions o;
  o.nproc_per_node = n;
  o.verbose = false;
  o.command = {"sh", "-c", script};
  o.rank_memory_max_bytes = cap;
  return o;
}

// The launcher's own folders under its cgroup (gpulab-launch-<pid>), which must be gone.
bool leftovers() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  const std::string mine = "gpulab-launch-" + std::to_string(::getpid());
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory"}) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == mine) return true;
      if (it.depth() > 4) it.disable_recursion_pending();
    }
  }
  return false;
}

}  // namespace

TEST(RankMemoryMax, ParsesBinarySizes) {
  EXPECT_EQ(*parse_memory_size("300M"), 300 * kMiB);
  EXPECT_EQ(*parse_memory_size("300MiB"), 300 * kMiB);
  EXPECT_EQ(*parse_memory_size("300mb"), 300 * kMiB);
  EXPECT_EQ(*parse_memory_size("1.5G"), 1536 * kMiB);
  EXPECT_EQ(*parse_memory_size("16777216"), 16 * kMiB);
  for (const char* bad : {"", "M", "3X", "-1G", "10M", "0", "1e3Q", "100 M M", "70T"}) {
    auto r = parse_memory_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument);
    EXPECT_NE(r.error().message.find("is not a memory size"), std::string::npos);
  }
  EXPECT_EQ(format_mib(300 * kMiB), "300 MiB");
  EXPECT_EQ(format_mib(1536 * kMiB), "1.5 GiB");
}

TEST(RankMemoryMax, RankOverItsCapIsNamedWithTheCap) {
  if (auto why = unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // Rank 1 holds 200 MiB in one process (tail keeps a line without newlines whole); rank 0
  // would run for a minute, so the launcher must stop it.
  auto r = run_launch(sh(2,
                         "if [ \"$RANK\" = 1 ]; then head -c 200M /dev/zero | tail >/dev/null; "
                         "else sleep 60; fi",
                         64 * kMiB));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->rank, 1);
  EXPECT_EQ(r->failure->oom_cap_bytes, 64 * kMiB);
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->message.find("rank 1 "), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("out of memory: the kernel's OOM killer acted at its "
                            "--rank_memory_max cap of 64 MiB"),
            std::string::npos)
      << r->message;
  EXPECT_FALSE(leftovers());
}

TEST(RankMemoryMax, RanksWithinTheCapFinishWithTheirPeaks) {
  if (auto why = unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  auto r = run_launch(sh(2, "head -c 40M /dev/zero | tail >/dev/null", 128 * kMiB));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_code, 0) << r->message;
  ASSERT_EQ(r->rank_peak_bytes.size(), 2u);
  for (const auto& [rank, peak] : r->rank_peak_bytes) {
    EXPECT_GE(peak, 40 * kMiB) << "rank " << rank;  // what tail held is charged to the rank
    EXPECT_LE(peak, 128 * kMiB) << "rank " << rank;
  }
  EXPECT_FALSE(leftovers());
}
