// The Python interpreter with torchvision that the parity tests compare against:
// $GPULAB_PYTHON, else Debian's /usr/bin/python3. Empty when neither has torchvision and numpy.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "core/subprocess.h"

namespace gpulab::train::testing {

inline const std::string& torchvision_python() {
  static const std::string found = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("GPULAB_PYTHON")) candidates.emplace_back(env);
    candidates.emplace_back("/usr/bin/python3");
    for (const auto& py : candidates) {
      auto r = run_process({py, "-c", "import torchvision, numpy"});
      if (r.ok() && r->success()) return py;
    }
    return std::string();
  }();
  return found;
}

}  // namespace gpulab::train::testing
