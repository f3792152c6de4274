// Usage errors from validate(): the error's own hint, else the command's --help.
#include "usage.h"

#include <string>

namespace gpulab::cli {

namespace {

// "gpulab bench train": the names from the root down to this command.
std::string command_path(const CLI::App* cmd) {
  std::string path = cmd->get_name();
  for (const CLI::App* at = cmd->get_parent(); at != nullptr; at = at->get_parent())
    path = at->get_name() + " " + path;
  return path;
}

}  // namespace

void throw_usage_error(const Status& status, const CLI::App* cmd) {
  if (status) return;
  Error e = status.error();
  if (e.hint.empty()) e.hint = "`" + command_path(cmd) + " --help` lists the options";
  throw Exception(std::move(e));
}

}  // namespace gpulab::cli
