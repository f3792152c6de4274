// The Python interpreter the parity tests compare against: $GPULAB_PYTHON, else Debian's
// /usr/bin/python3. Empty when neither has the modules asked for (torchvision or torch, and
// numpy).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "core/subprocess.h"

namespace gpulab::train::testing {

inline std::string python_with(const std::string& imports) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GPULAB_PYTHON")) candidates.emplace_back(env);
  candidates.emplace_back("/usr/bin/python3");
  for (const auto& py : candidates) {
    auto r = run_process({py, "-c", "import " + imports});
    if (r.ok() && r->success()) return py;
  }
  return std::string();
}

inline const std::string& torchvision_python() {
  static const std::string found = python_with("torchvision, numpy");
  return found;
}

// The Llama reference (tests/parity/llama_reference.py) needs torch alone.
inline const std::string& torch_python() {
  static const std::string found = python_with("torch, numpy");
  return found;
}

}  // namespace gpulab::train::testing
