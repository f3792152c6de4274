// Runs a child process with arguments (no shell), captures its output, and enforces a timeout.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab {

struct ProcessResult {
  int exit_code = -1;  // valid when !signaled
  int signal = 0;      // the signal that ended it, if any
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
  bool success() const { return !timed_out && signal == 0 && exit_code == 0; }
};

struct RunOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  std::map<std::string, std::string> env_add;  // added to the current environment
  std::string stdin_data;  // any size: fed while the output is read; a child may ignore it
  std::string cwd;
};

// Fails only when the program cannot be started; a non-zero exit is reported in ProcessResult.
Result<ProcessResult> run_process(const std::vector<std::string>& argv,
                                  const RunOptions& opts = {});

}  // namespace gpulab
