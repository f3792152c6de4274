// The launch flags on a command line: launch::launch_flag_rows(), registered once for every
// command that has them.
#include "base/launch_flags.h"

#include "base/flag_table.h"

namespace gpulab::cli {

void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, const std::vector<std::string>& only,
                      const std::string& group) {
  for (CLI::Option* opt : add_option_rows(cmd, f, launch::launch_flag_rows(), only))
    opt->group(group);
}

void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, LaunchFlagSet set,
                      const std::string& group) {
  if (set == LaunchFlagSet::kAll)
    return add_launch_flags(cmd, f, std::vector<std::string>{}, group);
  add_launch_flags(cmd, f, {"nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port"},
                   group);
}

}  // namespace gpulab::cli
