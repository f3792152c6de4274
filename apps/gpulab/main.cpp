// Entry point of gpulab: runs the commands that need no libtorch itself and hands every other
// command line (training, data, models, --help and --version, a misspelt command) to gpulab-torch,
// which has them all (dispatch.h).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_main.h"
#include "dispatch.h"

namespace {

// The names of this binary's own commands, read from the table itself.
std::vector<std::string> own_commands() {
  CLI::App app;
  gpulab::cli::CommandContext ctx;
  for (gpulab::cli::RegisterFn add : gpulab::cli::base_commands()) add(app, ctx);
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

}  // namespace

int main(int argc, char** argv) {
#if defined(GPULAB_TORCH_HALF)
  const std::string command = gpulab::cli::command_word(argc, argv);
  const auto own = own_commands();
  if (command.empty() || std::find(own.begin(), own.end(), command) == own.end()) {
    const auto half = gpulab::cli::torch_half(argv[0], GPULAB_TORCH_HALF);
    if (half) return gpulab::cli::exec_torch_half(*half, argv);
    if (!command.empty()) {
      std::fprintf(stderr,
                   "error: `gpulab %s` is in gpulab's training half, " GPULAB_TORCH_HALF
                   ", which is not beside this gpulab\n"
                   "hint: install gpulab and " GPULAB_TORCH_HALF " side by side (or rebuild)\n",
                   command.c_str());
      return 1;
    }
  }
  const char* facts = " (its libtorch half, " GPULAB_TORCH_HALF ", is not beside it)";
#else
  const char* facts = " (no trainer: built without libtorch)";
#endif
  return gpulab::cli::run_cli(argc, argv, gpulab::cli::base_commands(),
                              std::string("gpulab " GPULAB_VERSION) + facts);
}
