// The Python interpreter the parity tests compare against: $GPULAB_PYTHON, else the project's
// pinned environment (.venv, `make deps`), whose torch is the wheel gpulab links. Empty when
// neither imports the modules asked for: the tests then fail (the reference is part of the set-up,
// not a property of the machine), with reference_missing() saying what to run.
#pragma once

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

inline std::string python_with(const std::string& imports) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GPULAB_PYTHON")) candidates.emplace_back(env);
  candidates.emplace_back(GPULAB_REFERENCE_PYTHON);
  for (const auto& py : candidates) {
    if (py.empty()) continue;
    auto r = run_process({py, "-c", "import " + imports}, reference_run());
    if (r.ok() && r->success()) return py;
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
  return "the reference interpreter (" + std::string(GPULAB_REFERENCE_PYTHON) + ") cannot import " +
         what + ": run `make deps` (the pinned environment), or set GPULAB_PYTHON";
}

}  // namespace gpulab::train::testing
