// The process environment as an EnvLookup (env_lookup.h).
#include "launch/env_lookup.h"

#include <cstdlib>

namespace gpulab::launch {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

}  // namespace gpulab::launch
