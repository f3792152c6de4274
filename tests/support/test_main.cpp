// main() of the test binaries that load libtorch: GoogleTest's, or their fork server's start and
// stop (fork_server.h) when the command line asks for it.
#include <gtest/gtest.h>

#include "support/fork_server.h"

namespace {

int run_tests(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace

int main(int argc, char** argv) {
  if (auto rc = gpulab::testing::fork_server::server_command(argc, argv, run_tests)) return *rc;
  return run_tests(argc, argv);
}
