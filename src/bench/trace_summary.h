// The heaviest ops of a libtorch profiler trace by self time (a GPU's kernels, where it has any):
// the table `gpulab bench train --profile` and `gpulab bench generate --profile` print.
#pragma once

#include <string>

#include "core/json.h"

namespace gpulab::bench {

// Sums the self time of each op name in a Chrome trace written by the libtorch profiler and
// returns the `top` heaviest as [{name, self_ms, calls, on: "gpu" or "cpu"}].
Json summarize_trace(const std::string& trace_file, int top = 15);

// The table of summarize_trace's rows, a line each, under a heading naming the trace file.
std::string trace_table(const std::string& trace_file, const Json& top);

}  // namespace gpulab::bench
