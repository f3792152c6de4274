// Durations as people read them: ETAs of progress lines and run-time estimates.
#pragma once

#include <string>

namespace gpulab {

// 42.3 -> "42s", 185 -> "3m05s", 7384 -> "2h03m"; negative -> "0s".
std::string human_duration(double seconds);

}  // namespace gpulab
