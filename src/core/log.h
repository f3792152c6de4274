// Logging through spdlog (its compiled part built once, src/third_party): one logger to stderr,
// level from GPULAB_LOG or --verbose.
#pragma once

#include <spdlog/spdlog.h>

namespace gpulab {

// Sets up the default logger (stderr, "[level] message"); level "debug", "info", "warn", ...
void init_logging(const std::string& level = "");

}  // namespace gpulab
