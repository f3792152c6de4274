// The libtorch test binaries' fork server and client (tests/support/fork_server.h), run for real
// with a stand-in test binary (fork-probe): a case forked from the server sees what a fresh
// process would, its status and its streams reach ctest, a killed client takes its case with it,
// and anything a fork could not copy faithfully runs as a fresh process.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/subprocess.h"
#include "support/fork_protocol.h"
#include "support/temp_dir.h"

namespace gpulab {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

struct Report {
  pid_t pid = 0, ppid = 0, pgid = 0;
  std::string cwd, value;
};

Report read_report(const fs::path& path) {
  Report r;
  std::ifstream f(path);
  f >> r.pid >> r.ppid >> r.pgid;
  f.ignore();
  std::getline(f, r.cwd);
  std::getline(f, r.value);
  return r;
}

bool gone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

class ForkServer : public ::testing::Test {
 protected:
  void SetUp() override { start(GPULAB_FORK_PROBE); }
  void TearDown() override { control(probe_, "stop"); }

  void start(const std::string& probe) {
    probe_ = probe;
    auto r = control(probe_, "start");
    ASSERT_TRUE(r.success()) << r.err;
    std::ifstream f(socket_.string() + ".pid");
    ASSERT_TRUE(f >> server_pid_) << "no pid file beside " << socket_;
  }

  ProcessResult control(const std::string& probe, const std::string& verb) {
    auto r = run_process({probe, testing::fork_server::kServerFlag, verb, socket_.string()});
    return r ? *r : ProcessResult{};
  }

  // The client running the probe; ARGS after the report's path.
  ProcessResult run(const std::vector<std::string>& args, RunOptions opts = {}) {
    std::vector<std::string> argv{GPULAB_FORK_CLIENT, socket_.string(), probe_, report_.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_process(argv, opts);
    return r ? *r : ProcessResult{};
  }

  testing::TempDir dir_{"fork"};
  fs::path socket_ = dir_.path / "s.sock";
  fs::path report_ = dir_.path / "report";
  std::string probe_;
  pid_t server_pid_ = 0;
};

TEST_F(ForkServer, RunsTheCaseInAForkWithTheClientsDirectoryEnvironmentAndStreams) {
  RunOptions opts;
  opts.cwd = dir_.path.string();
  opts.env_add["FORK_PROBE_VALUE"] = "from the client";
  auto r = run({}, opts);
  ASSERT_TRUE(r.success()) << r.err;
  EXPECT_EQ(r.out, "probe stdout\n");
  EXPECT_EQ(r.err, "probe stderr\n");
  const Report rep = read_report(report_);
  EXPECT_EQ(rep.ppid, server_pid_) << "not a child of the server: it ran fresh";
  EXPECT_EQ(rep.pgid, rep.pid) << "a case runs in a process group of its own";
  EXPECT_EQ(fs::path(rep.cwd), fs::canonical(dir_.path));
  EXPECT_EQ(rep.value, "from the client");
}

TEST_F(ForkServer, TheCasesExitStatusAndSignalReachTheClient) {
  auto r = run({"exit", "7"});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(read_report(report_).ppid, server_pid_);
  r = run({"signal", std::to_string(SIGUSR1)});  // ends the process, leaves no core
  EXPECT_EQ(r.signal, SIGUSR1);
  EXPECT_EQ(read_report(report_).ppid, server_pid_);
}

TEST_F(ForkServer, AKilledClientTakesItsCaseWithIt) {
  const fs::path late = dir_.path / "late";
  RunOptions opts;
  opts.timeout = milliseconds(2500);  // as ctest's timeout kills the test it started
  auto r = run({"sleep", "15000", late.string()}, opts);
  ASSERT_TRUE(r.timed_out);
  const Report rep = read_report(report_);
  ASSERT_EQ(rep.ppid, server_pid_);
  // Within 5 s of the client's end, well before the case would have woken.
  for (int i = 0; i < 500 && !gone(rep.pid); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(gone(rep.pid)) << "the case outlived its client";
  EXPECT_FALSE(fs::exists(late));
}

TEST_F(ForkServer, ALoadTimeVariableThatDiffersRunsTheBinaryFresh) {
  RunOptions opts;
  opts.env_add["OMP_NUM_THREADS"] = "7";  // libgomp reads it once, when loaded
  auto r = run({"exit", "3"}, opts);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "probe stdout\n");
  EXPECT_NE(read_report(report_).ppid, server_pid_);
  std::ifstream log(socket_.string() + ".log");
  std::string all((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("a load-time environment variable differs"), std::string::npos) << all;
}

TEST_F(ForkServer, ARebuiltBinaryRunsFresh) {
  control(probe_, "stop");
  const fs::path copy = dir_.path / "probe";
  fs::copy_file(GPULAB_FORK_PROBE, copy);
  fs::permissions(copy, fs::perms::owner_all);
  start(copy.string());
  ASSERT_TRUE(run({}).success());
  EXPECT_EQ(read_report(report_).ppid, server_pid_);
  // A rebuild writes a new file where the old one was: the server still holds the old code.
  fs::remove(copy);
  fs::copy_file(GPULAB_FORK_PROBE, copy);
  fs::permissions(copy, fs::perms::owner_all);
  ASSERT_TRUE(run({}).success());
  EXPECT_NE(read_report(report_).ppid, server_pid_);
}

TEST_F(ForkServer, WithoutAServerTheClientRunsTheBinaryItself) {
  control(probe_, "stop");
  EXPECT_TRUE(gone(server_pid_) || !fs::exists(socket_));
  EXPECT_FALSE(fs::exists(socket_.string() + ".pid"));
  auto r = run({"exit", "5"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.out, "probe stdout\n");
  EXPECT_NE(read_report(report_).ppid, server_pid_);
}

TEST_F(ForkServer, AGarbledRequestChangesNothingAndTheNextCaseRuns) {
  // Sixteen bytes of length-framed garbage and no descriptors; then what the server answers.
  const std::string garble =
      "import socket, sys\n"
      "s = socket.socket(socket.AF_UNIX)\n"
      "s.connect(sys.argv[1])\n"
      "s.sendall(b'\\x10\\0\\0\\0garbage-garbage!')\n"
      "try:\n    print(repr(s.recv(64)))\n"
      "except ConnectionResetError:\n    print('reset')\n";
  auto r = run_process({"/usr/bin/python3", "-c", garble, socket_.string()});
  ASSERT_TRUE(r && r->success()) << (r ? r->err : "");
  EXPECT_TRUE(r->out == "b''\n" || r->out == "reset\n")
      << "a request without descriptors is closed, not run: " << r->out;
  ASSERT_TRUE(run({}).success());
  EXPECT_EQ(read_report(report_).ppid, server_pid_);
}

}  // namespace
}  // namespace gpulab
