// A fork server for a test binary that loads libtorch: started once per test run (a ctest
// fixture), it listens on a Unix socket and runs each test case's command line in a child forked
// from the loaded binary, so that a case skips libtorch's start (operator registration and page
// faults: about 0.7 CPU-s, paid by some 400 cases a run). The child gets the client's arguments,
// working directory, environment and standard streams, runs in a process group of its own that is
// killed when the client goes away (ctest's timeout), and its exit status or signal goes back to
// the client (fork_client.cpp). The server answers "fallback" (the client then runs the binary
// itself) when a fork would not be a faithful copy of a fresh process: the binary on disk is not
// the one it loaded, the client's environment differs in a variable libraries read only when
// loaded (OpenMP, allocators, libtorch, the sanitizers), or the server has more than one thread.
#pragma once

#include <optional>

namespace gpulab::testing::fork_server {

// What a fresh process would run: the test binary's main without the server.
using Main = int (*)(int argc, char** argv);

// With argv[1] == kServerFlag: "start SOCKET" (returns once the server listens, the server
// itself detached) or "stop SOCKET"; returns the exit code. nullopt for any other command line.
std::optional<int> server_command(int argc, char** argv, Main run);

}  // namespace gpulab::testing::fork_server
