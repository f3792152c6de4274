// Routes a command line to gpulab-torch when gpulab does not have the command (dispatch.h).
#include "dispatch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "core/files.h"

namespace gpulab::cli {

namespace fs = std::filesystem;

std::string command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return "";
    if (arg == "--log_level" || arg == "--log-level") {
      ++i;  // its value
      continue;
    }
    if (!arg.empty() && arg[0] == '-') continue;
    return arg;
  }
  return "";
}

namespace {

std::optional<fs::path> beside(const fs::path& program, const std::string& name) {
  std::error_code ec;
  const fs::path real = fs::canonical(program, ec);
  if (ec) return std::nullopt;
  return find_executable({real.parent_path() / name});
}

// argv[0] as a shell found it: a path, or a name looked up on $PATH.
std::optional<fs::path> program_path(const char* argv0) {
  if (argv0 == nullptr || *argv0 == '\0') return std::nullopt;
  if (std::strchr(argv0, '/') != nullptr) return fs::path(argv0);
  return which(argv0);
}

}  // namespace

std::optional<fs::path> torch_half(const char* argv0, const std::string& name) {
  if (auto found = beside("/proc/self/exe", name)) return found;
  if (auto program = program_path(argv0)) return beside(*program, name);
  return std::nullopt;
}

int exec_torch_half(const fs::path& binary, char** argv) {
  // Its own path as argv[0]: a crash report names the binary whose offsets it prints, and ps the
  // program that runs.
  std::string self = binary.string();
  argv[0] = self.data();
  ::execv(binary.c_str(), argv);
  const int err = errno;
  std::fflush(stdout);
  std::cerr << "error: cannot run " << binary.string()
            << ", gpulab's training half: " << std::strerror(err) << "\n"
            << "hint: gpulab and gpulab-torch are installed side by side; copy both\n";
  return 1;
}

}  // namespace gpulab::cli
