// An environment made of a map, for the tests that read a rank's or a Slurm step's variables.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "launch/env_lookup.h"

namespace gpulab::launch::testing {

inline EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace gpulab::launch::testing
