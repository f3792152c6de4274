// The command-line front both gpulab binaries share: registers a command table, parses, runs the
// chosen command and maps errors to exit codes (gpulab itself and its libtorch half,
// gpulab-torch, differ only in their tables and --version line).
#pragma once

#include <string>
#include <vector>

#include "commands.h"

namespace gpulab::cli {

// The commands that need no libtorch: every gpulab binary has them.
const std::vector<RegisterFn>& base_commands();

// Parses argv against `table` and runs the command; returns the process's exit code.
int run_cli(int argc, char** argv, const std::vector<RegisterFn>& table,
            const std::string& version);

}  // namespace gpulab::cli
