// fork-probe: a stand-in test binary for the fork server's own tests (tests/core/
// fork_server_test.cpp): the same server mode as the libtorch test binaries, and a main that
// reports the process it runs in.
//   fork-probe REPORT [exit N | signal N | sleep MS THEN_FILE]
// writes "pid ppid pgid" on one line, the working directory and $FORK_PROBE_VALUE on the next
// two, prints "probe stdout" and "probe stderr" to its streams, then exits 0, exits N, raises
// signal N, or sleeps MS milliseconds and creates THEN_FILE.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "support/fork_server.h"

namespace {

int probe(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* value = std::getenv("FORK_PROBE_VALUE");
  {
    std::ofstream report(argv[1]);
    report << ::getpid() << " " << ::getppid() << " " << ::getpgid(0) << "\n"
           << std::filesystem::current_path().string() << "\n"
           << (value ? value : "(unset)") << "\n";
  }
  std::printf("probe stdout\n");
  std::fprintf(stderr, "probe stderr\n");
  std::fflush(stdout);
  const std::string what = argc > 3 ? argv[2] : "";
  if (what == "exit") return std::atoi(argv[3]);
  if (what == "signal") std::raise(std::atoi(argv[3]));
  if (what == "sleep" && argc > 4) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[3])));
    std::ofstream(argv[4]) << "late\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto rc = gpulab::testing::fork_server::server_command(argc, argv, probe)) return *rc;
  return probe(argc, argv);
}
