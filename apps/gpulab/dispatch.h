// Which binary runs a command line: gpulab itself, or gpulab-torch, its libtorch half. Loading
// libtorch costs a process about a second and 470 MiB; the service, the launcher, image
// builds and GPU discovery need none of it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpulab::cli {

// The command a command line names: its first word that is neither an option nor the value of
// --log_level (an option before the command); "" when there is none.
std::string command_word(int argc, char** argv);

// The libtorch half beside this binary: found through /proc/self/exe, or through argv[0] when the
// program was started by another loader (ld.so by hand, valgrind), whose path /proc/self/exe names.
std::optional<std::filesystem::path> torch_half(const char* argv0, const std::string& name);

// Replaces this process with `binary` (argv[0] its path, the other arguments and the environment
// as they are); returns only on failure, after printing the error.
int exec_torch_half(const std::filesystem::path& binary, char** argv);

}  // namespace gpulab::cli
