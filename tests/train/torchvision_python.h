// The Python interpreter the parity tests compare against: $GPULAB_PYTHON, else the project's
// pinned environment (.venv, `make deps`), whose torch is the wheel gpulab links. Empty when
// neither has the modules asked for: the tests then fail (the reference is part of the set-up,
// not a property of the machine), with reference_missing() saying what to run.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/subprocess.h"

#ifndef GPULAB_REFERENCE_PYTHON
#define GPULAB_REFERENCE_PYTHON ""
#endif

namespace gpulab::train::testing {

// A reference run's bound: importing torch and transformers and running a model takes seconds on
// a quiet machine but can pass run_process's 30 s default on a loaded 2-core one (seen: a parity
// case failing with an empty message under a parallel build); a hung reference still ends.
inline RunOptions reference_run() {
  RunOptions o;
  o.timeout = std::chrono::minutes(10);
  return o;
}

// Why a reference process failed, for an assertion's message: its stderr alone is empty when it
// was killed (a timeout, a signal).
inline std::string reference_failure(const Result<ProcessResult>& r) {
  if (!r.ok()) return r.error().message;
  if (r->timed_out) return "the reference timed out; stderr: " + r->err;
  if (r->signal != 0) return "the reference was killed by signal " + std::to_string(r->signal);
  return "the reference exited " + std::to_string(r->exit_code) + ": " + r->err;
}

// The fork server's client (tests/parity/pyref_client.py.in) in place of the project's own
// interpreter when ctest names it (GPULAB_PYREF): it runs the reference in a child of a process
// that has imported torch already, or in `py` itself when the server does not answer.
inline std::string forked(const std::string& py) {
  const char* client = std::getenv("GPULAB_PYREF");
  if (py != GPULAB_REFERENCE_PYTHON || client == nullptr || access(client, X_OK) != 0) return py;
  return client;
}

// Finds the modules without importing them: importing torch alone takes 3 s (torchvision 5 s),
// paid again by every test process that asks, while a module that is installed but fails to
// import still fails the reference run itself, with its stderr in the test's message.
inline std::string python_with(const std::string& modules) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GPULAB_PYTHON")) candidates.emplace_back(env);
  candidates.emplace_back(GPULAB_REFERENCE_PYTHON);
  const std::string probe =
      "import importlib.util as u, sys\n"
      "sys.exit(0 if all(u.find_spec(m.strip()) for m in sys.argv[1].split(',')) "
      "else 1)";
  for (const auto& py : candidates) {
    if (py.empty()) continue;
    auto r = run_process({py, "-c", probe, modules}, reference_run());
    if (r.ok() && r->success()) return forked(py);
  }
  return std::string();
}

inline const std::string& torchvision_python() {
  static const std::string found = python_with("torchvision, numpy");
  return found;
}

// The Llama and GPT-2 references need torch alone (transformers where they compare with it).
inline const std::string& torch_python() {
  static const std::string found = python_with("torch, numpy");
  return found;
}

// The failure message when the reference interpreter lacks `what`.
inline std::string reference_missing(const std::string& what) {
  return "the reference interpreter (" + std::string(GPULAB_REFERENCE_PYTHON) + ") lacks " + what +
         ": run `make deps` (the pinned environment), or set GPULAB_PYTHON";
}

}  // namespace gpulab::train::testing
