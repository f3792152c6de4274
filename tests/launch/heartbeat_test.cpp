// Hang detection by heartbeat: the record a rank writes, the flags, and the adaptive limit
// (learned from the slowest phase, not applied during warm-up) with real rank processes.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launch/heartbeat.h"
#include "launch/launcher.h"

using namespace gpulab;
using namespace gpulab::launch;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  auto d = fs::temp_directory_path() /
           ("gpulab-heartbeat-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Two shell ranks; `script` sees $D (a scratch folder) and beats with
// "beat N SLOWEST_MS TEXT" (the record format heartbeat() writes).
LaunchOptions two_ranks(const fs::path& dir, const std::string& script, HangPolicy hang) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.verbose = false;
  o.hang = hang;
  o.command = {
      "sh", "-c",
      "beat() { printf '#%s %s %s' \"$1\" \"$2\" \"$3\" > $GPULAB_HEARTBEAT_FILE; }; " + script};
  o.env["D"] = dir.string();
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(Heartbeat, RecordCountsProgressPointsAndTimesTheSlowestPhase) {
  auto dir = scratch("record");
  const auto file = (dir / "beat").string();
  ASSERT_EQ(::setenv(kEnvHeartbeatFile, file.c_str(), 1), 0);
  heartbeat_if_armed("not armed yet: ignored");
  EXPECT_FALSE(read_heartbeat(file).has_value());
  heartbeat("epoch 1 batch 1 of 9");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  heartbeat("epoch 1 batch 2 of 9");
  heartbeat("epoch 1 batch 3 of 9");
  heartbeat_if_armed("waiting in allreduce of gradient bucket 1 of 4");
  auto b = read_heartbeat(file);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->progress, 3);
  EXPECT_GE(b->slowest_phase_s, 0.12);
  EXPECT_LT(b->slowest_phase_s, 5.0);
  EXPECT_EQ(b->what, "waiting in allreduce of gradient bucket 1 of 4");
  ::unsetenv(kEnvHeartbeatFile);
  fs::remove_all(dir);
}

TEST(Heartbeat, AFileCaughtBetweenTruncateAndWriteKeepsTheLastText) {
  // CI once reported a hang without the waiting peer's text: the peer, a shell rank, was caught
  // between `printf ... >`'s truncate and its write, and its empty file read as "never beat".
  auto dir = scratch("truncated");
  const auto file = (dir / "beat").string();
  { std::ofstream(file) << "waiting in allreduce of gradient bucket 1 of 4"; }
  auto first = read_heartbeat(file);
  ASSERT_TRUE(first.has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::resize_file(file, 0);  // the moment a rewrite has truncated and not yet written
  EXPECT_FALSE(read_heartbeat(file).has_value()) << "an empty file before any record is no beat";
  auto kept = read_heartbeat(file, first);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->what, "waiting in allreduce of gradient bucket 1 of 4");
  EXPECT_GT(kept->when, first->when) << "the truncate is a sign of life";
  { std::ofstream(file) << "#7 250 epoch 3 batch 1 of 9"; }
  auto next = read_heartbeat(file, kept);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->what, "epoch 3 batch 1 of 9");
  EXPECT_EQ(next->progress, 7);
  fs::remove_all(dir);
}

TEST(Heartbeat, FlagsMakeAPolicy) {
  auto a = hang_policy_from_flags("auto", 60);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->adaptive);
  EXPECT_EQ(a->floor.count(), 60000);
  // The learned limit: the floor until factor x the slowest phase is larger.
  EXPECT_EQ(a->limit(0.5).count(), 60000);
  EXPECT_EQ(a->limit(12.0).count(), 120000);
  auto off = hang_policy_from_flags("0", 60);
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->off());
  auto fixed = hang_policy_from_flags("8.5", 60);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->fixed.count(), 8500);
  EXPECT_EQ(fixed->limit(100.0).count(), 8500);
  for (const char* bad : {"", "soon", "-1", "8s", "1e9"})
    EXPECT_FALSE(hang_policy_from_flags(bad, 60).ok()) << bad;
  EXPECT_FALSE(hang_policy_from_flags("auto", 0).ok());
}

TEST(Heartbeat, AdaptiveLimitNamesTheSilentRankOnceLearned) {
  // Phases of 0.1 s, floor 0.5 s: the limit is 10 x 0.1 = 1 s. Rank 1 stops beating after its
  // 5th batch; rank 0 waits in a collective (refreshing its record) as a blocked peer does.
  auto dir = scratch("adaptive");
  HangPolicy p;
  p.adaptive = true;
  p.floor = std::chrono::milliseconds(500);
  auto o = two_ranks(dir,
                     "for i in 1 2 3 4 5; do beat $i 100 \"epoch 1 batch $i of 9\"; sleep 0.1; "
                     "done; if [ $RANK = 1 ]; then sleep 60; fi; "
                     "for i in $(seq 40); do beat 5 100 'waiting in allreduce of gradient bucket "
                     "1 of 4'; sleep 0.2; done",
                     p);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_launch(o);
  const double secs = seconds_since(t0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 124);
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->rank, 1);
  EXPECT_GT(r->failure->silent_s, 1.0);
  EXPECT_NE(r->message.find("hangs: no progress for"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("limit 1.0 s = 10 x the slowest phase so far, 0.10 s"),
            std::string::npos)
      << r->message;
  EXPECT_NE(r->message.find("last progress: epoch 1 batch 5 of 9"), std::string::npos)
      << r->message;
  EXPECT_NE(r->message.find("rank 0: waiting in allreduce"), std::string::npos) << r->message;
  EXPECT_LT(secs, 6.0);
  fs::remove_all(dir);
}

TEST(Heartbeat, AdaptiveLimitSparesWarmUpAndPhasesWithinTheLearnedLimit) {
  // Floor 0.3 s. A 1 s silence after 2 progress points is warm-up (not judged); a 1.2 s silence
  // after a 0.4 s phase is within 10 x 0.4 s. The job ends normally.
  auto dir = scratch("spared");
  HangPolicy p;
  p.adaptive = true;
  p.floor = std::chrono::milliseconds(300);
  auto o = two_ranks(dir,
                     "beat 1 0 'epoch 1 batch 1 of 9'; beat 2 0 'epoch 1 batch 2 of 9'; sleep 1; "
                     "for i in 3 4 5; do beat $i 400 \"epoch 1 batch $i of 9\"; done; sleep 1.2; "
                     "echo ok > $D/done$RANK",
                     p);
  auto r = run_launch(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->message;
  EXPECT_TRUE(fs::exists(dir / "done0"));
  EXPECT_TRUE(fs::exists(dir / "done1"));
  fs::remove_all(dir);
}

TEST(Heartbeat, NamesTheRankNotWaitingEvenWhenAPeerWaitedFirst) {
  // The CI case: rank 0 reaches the collective (one record, not refreshed) before rank 1 writes
  // its last batch record and stalls, so rank 0's beat is the older one; rank 1 is the culprit.
  auto dir = scratch("waited-first");
  HangPolicy p;
  p.adaptive = true;
  p.floor = std::chrono::milliseconds(500);
  auto o = two_ranks(dir,
                     "for i in 1 2 3 4 5; do beat $i 100 \"epoch 1 batch $i of 9\"; sleep 0.1; "
                     "done; if [ $RANK = 0 ]; then beat 5 100 'waiting in allreduce'; sleep 60; "
                     "fi; sleep 0.4; beat 6 100 'epoch 1 batch 6 of 9'; sleep 60",
                     p);
  auto r = run_launch(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 124);
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->rank, 1) << r->message;
  EXPECT_NE(r->message.find("last progress: epoch 1 batch 6 of 9"), std::string::npos)
      << r->message;
  EXPECT_NE(r->message.find("rank 0: waiting in allreduce"), std::string::npos) << r->message;
  fs::remove_all(dir);
}
