// The parity tests' fork server (tests/parity/pyref_server.py) against a fresh interpreter: the
// same output, errors, exit status, working directory and environment for what references do.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "train/torchvision_python.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;

struct Ran {
  std::string out, err;
  int exit_code = 0, signal = 0;
};

Ran run(const std::string& py, const std::vector<std::string>& args, const RunOptions& o) {
  std::vector<std::string> argv = {py};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_process(argv, o);
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok()) return {};
  return {r->out, r->err, r->exit_code, r->signal};
}

// Under ctest the client is named (GPULAB_PYREF); run alone, there is nothing to compare.
std::string client() {
  const char* c = std::getenv("GPULAB_PYREF");
  return c == nullptr || std::string(c) == "off" ? std::string() : std::string(c);
}

TEST(PyRef, RunsAScriptOrCodeAsAFreshInterpreterDoes) {
  if (client().empty()) GTEST_SKIP() << "GPULAB_PYREF is not set: run it through ctest";
  gpulab::testing::TempDir dir("pyref");
  const fs::path script = dir.path / "t.py";
  std::ofstream(dir.path / "sibling.py") << "VALUE = 42\n";
  std::ofstream(script)
      << "import os, sys, tempfile, sibling\n"
         "print(sibling.VALUE, sys.argv[1:], os.getcwd(), tempfile.gettempdir(), sys.path)\n"
         "print(os.environ.get('PYREF_CHECK'), sys.stdin.read().upper())\n"
         "print('to stderr', file=sys.stderr)\n"
         "if sys.argv[1] == 'raise': raise RuntimeError('boom')\n"
         "if sys.argv[1] == 'kill': os.kill(os.getpid(), 15)\n"
         "sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else 'a message')\n";
  RunOptions o;
  o.cwd = dir.path.string();
  o.stdin_data = "some input";
  o.env_add = {{"PYREF_CHECK", "passed"}, {"TMPDIR", dir.path.string()}};
  const std::vector<std::vector<std::string>> cases = {
      {script.string(), "0"},
      {script.string(), "3"},
      {script.string(), "raise"},
      {script.string(), "kill"},
      {script.string(), "text"},
      {"-c", "import sys; print(sys.argv, sys.path); sys.exit(sys.stdin.read())", "x", "y"},
      {"-c", "syntax error here"}};
  for (const auto& args : cases) {
    const Ran fresh = run(GPULAB_REFERENCE_PYTHON, args, o), forked = run(client(), args, o);
    EXPECT_EQ(forked.out, fresh.out) << args[1];
    EXPECT_EQ(forked.err, fresh.err) << args[1];
    EXPECT_EQ(forked.exit_code, fresh.exit_code) << args[1];
    EXPECT_EQ(forked.signal, fresh.signal) << args[1];
  }
  EXPECT_EQ(run(client(), {script.string(), "kill"}, o).signal, SIGTERM);
}

// The client did use the server (torch already imported), and runs a fresh interpreter when its
// environment differs in what libraries read only when loaded (OpenMP's spin here).
TEST(PyRef, UsesTheServerUnlessALoadTimeVariableDiffers) {
  if (client().empty()) GTEST_SKIP() << "GPULAB_PYREF is not set: run it through ctest";
  const std::vector<std::string> probe = {"-c", "import sys; print('torch' in sys.modules)"};
  EXPECT_EQ(run(client(), probe, {}).out, "True\n");
  RunOptions other;
  other.env_add = {{"GOMP_SPINCOUNT", "7"}};
  EXPECT_EQ(run(client(), probe, other).out, "False\n");
  EXPECT_EQ(run(GPULAB_REFERENCE_PYTHON, probe, {}).out, "False\n");
}

}  // namespace
}  // namespace gpulab::train
