// Configures spdlog's default logger for gpulab: stderr only, plain pattern, level by env.
#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace gpulab {

void init_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("gpulab");
  logger->set_pattern("[%l] %v");
  std::string lvl = level;
  if (lvl.empty()) {
    const char* env = std::getenv("GPULAB_LOG");
    lvl = env ? env : "warn";
  }
  logger->set_level(spdlog::level::from_str(lvl));
  spdlog::set_default_logger(logger);
}

}  // namespace gpulab
