// Bad flag values found by a library's validate(): thrown as the usage error every command
// prints (error: ..., hint: ..., exit 2), the hint pointing at `--help` when the check gave none.
#pragma once

#include <CLI/CLI.hpp>

#include "core/result.h"

namespace gpulab::cli {

// Throws gpulab::Exception for a failed status; nothing otherwise.
void throw_usage_error(const Status& status, const CLI::App* cmd);

}  // namespace gpulab::cli
