// How launch/ reads environment variables: through a lookup function, so that tests pass a map
// and the program passes getenv.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace gpulab::launch {

// Looks a variable up; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
// This process's own environment.
EnvLookup process_env();

}  // namespace gpulab::launch
