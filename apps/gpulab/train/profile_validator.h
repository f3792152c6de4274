// The --profile check shared by `gpulab bench train` and `gpulab bench generate`: the trace's
// folder must exist and be writable before the timed runs, not found out once they are done.
#pragma once

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

namespace gpulab {

inline CLI::Validator profile_validator() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (fs::is_directory(v, ec)) return "--profile " + v + " is a folder: give a file name";
        const fs::path dir =
            fs::path(v).parent_path().empty() ? fs::path(".") : fs::path(v).parent_path();
        if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
          return "cannot write the profile " + v + ": the folder " + dir.string() +
                 " does not exist or is not writable";
        return {};
      },
      "FILE");
}

}  // namespace gpulab
