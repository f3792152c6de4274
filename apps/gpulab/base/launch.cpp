// `gpulab launch`: starts N ranks of any command with the rendezvous environment (torchrun's
// variable names), stops them all when one fails, and restarts the group if asked to.
#include <cstdio>
#include <memory>
#include <utility>

#include "base/launch_flags.h"
#include "commands.h"
#include "core/error.h"
#include "launch/launcher.h"
#include "usage.h"

namespace gpulab::cli {

void add_launch_command(CLI::App& app, CommandContext& ctx) {
  auto flags = std::make_shared<launch::LaunchFlags>();
  auto o = std::make_shared<launch::LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch", "Run a command as N ranks (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set)");
  cmd->footer("Example: gpulab launch --nproc_per_node 2 -- ./my_rank_program --flag");
  add_launch_flags(cmd, *flags, LaunchFlagSet::kAll);
  cmd->add_option("--threads_per_rank", o->threads_per_rank,
                  "intra-op threads per rank (default: this host's cores split between ranks)");
  cmd->add_option("command", o->command, "the command each rank runs (after --)")->required();
  cmd->callback([cmd, flags, o, &ctx] {
    auto converted = launch::to_launch_options(*flags);
    if (!converted) throw_usage_error(converted.error(), cmd);
    launch::LaunchOptions lo = std::move(*converted);
    lo.command = o->command;
    lo.threads_per_rank = o->threads_per_rank;
    auto r = launch::run_launch(lo).value_or_throw();
    if (r.stopped_by_signal) {
      std::fprintf(stderr, "gpulab launch: %s\n", r.message.c_str());  // asked for: no error
    } else if (r.exit_code != 0) {
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", r.message.c_str());
      if (r.restarts > 0) std::fprintf(stderr, "(after %d restart(s))\n", r.restarts);
    }
    ctx.exit_code = r.exit_code;
  });
}

}  // namespace gpulab::cli
