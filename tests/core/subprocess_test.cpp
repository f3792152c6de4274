// Tests the subprocess runner with real child processes: output, exit codes, signals, timeouts.
#include <gtest/gtest.h>

#include <chrono>

#include "core/subprocess.h"

using namespace gpulab;

TEST(Subprocess, CapturesStdoutStderrAndExitCode) {
  auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->success());
}

TEST(Subprocess, LargeOutputIsDrained) {
  auto r = run_process({"sh", "-c", "head -c 1000000 /dev/zero"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.size(), 1000000u);
  EXPECT_TRUE(r->success());
}

TEST(Subprocess, TimeoutKillsChild) {
  RunOptions o;
  o.timeout = std::chrono::milliseconds(300);
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_process({"sleep", "10"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(Subprocess, MissingProgramIsAnError) {
  auto r = run_process({"/no/such/program"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kNotFound);
}

TEST(Subprocess, EnvironmentAndStdinArePassed) {
  RunOptions o;
  o.env_add["GPULAB_TEST_VAR"] = "hello";
  o.stdin_data = "from-stdin";
  auto r = run_process({"sh", "-c", "printf '%s ' \"$GPULAB_TEST_VAR\"; cat"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "hello from-stdin");
}

// Input beyond a pipe's buffer flows while the output is read (cat answers before it has read
// all of it), and a child that exits without reading its input neither hangs nor kills us
// (EPIPE, not SIGPIPE).
TEST(Subprocess, LargeStdinFlowsAndAnUnreadOneIsHarmless) {
  RunOptions o;
  o.stdin_data = std::string(3'000'000, 'x');
  auto r = run_process({"cat"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.size(), 3'000'000u);
  EXPECT_TRUE(r->success());
  auto ignored = run_process({"sh", "-c", "exec 0<&-; echo done; exit 4"}, o);
  ASSERT_TRUE(ignored.ok());
  EXPECT_EQ(ignored->out, "done\n");
  EXPECT_EQ(ignored->exit_code, 4);
}

// A child that never reads a large input and never exits ends at the deadline.
TEST(Subprocess, UnreadStdinOfAHungChildEndsAtTheDeadline) {
  RunOptions o;
  o.stdin_data = std::string(1'000'000, 'x');
  o.timeout = std::chrono::milliseconds(300);
  auto r = run_process({"sleep", "10"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
}
