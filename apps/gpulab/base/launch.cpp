// `gpulab launch`: starts N ranks of any command with the rendezvous environment (torchrun's
// variable names), stops them all when one fails, and restarts the group if asked to.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "commands.h"
#include "core/error.h"
#include "launch/launcher.h"
#include "launch/rank_cgroup.h"

namespace gpulab::cli {

void add_launch_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<launch::LaunchOptions>();
  auto grace_s = std::make_shared<double>(3.0);
  auto hang = std::make_shared<std::pair<std::string, double>>("auto", 60.0);
  auto* cmd = app.add_subcommand(
      "launch", "Run a command as N ranks (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set)");
  cmd->footer("Example: gpulab launch --nproc_per_node 2 -- ./my_rank_program --flag");
  cmd->add_option("--nproc_per_node", o->nproc_per_node, "ranks on this node")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--nnodes", o->nnodes, "nodes in the job")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--node_rank", o->node_rank, "this node's index (0 hosts the rendezvous)")
      ->capture_default_str();
  cmd->add_option("--master_addr", o->master_addr, "address of node 0 (default 127.0.0.1)");
  cmd->add_option("--master_port", o->master_port,
                  "rendezvous port (default: a free port on one node, 29500 on several)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--max_restarts", o->max_restarts,
                  "restart the whole group this many times after a failure")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--threads_per_rank", o->threads_per_rank,
                  "intra-op threads per rank (default: this host's cores split between ranks)");
  cmd->add_option("--stop_grace", *grace_s,
                  "seconds between SIGTERM and SIGKILL when stopping the ranks")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  cmd->add_option("--heartbeat_timeout", hang->first,
                  "when a rank that writes $GPULAB_HEARTBEAT_FILE (gpulab train does) and stops "
                  "making progress is hung: auto (10 x its slowest phase, at least "
                  "--heartbeat_floor), seconds, or 0 (off)")
      ->check([](const std::string& v) { return launch::heartbeat_timeout_error(v); })
      ->capture_default_str();
  cmd->add_option("--heartbeat_floor", hang->second,
                  "seconds of silence that --heartbeat_timeout auto always allows")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  auto memory_max = std::make_shared<std::string>();
  cmd->add_option("--rank_memory_max", *memory_max,
                  "memory cap of each rank (e.g. 300M, 2G): every rank runs in its own cgroup "
                  "and one that outgrows it is ended by the kernel's OOM killer, reported here")
      ->check([](const std::string& v) { return launch::memory_size_error(v); });
  cmd->add_option("command", o->command, "the command each rank runs (after --)")->required();
  cmd->callback([o, grace_s, hang, memory_max, &ctx] {
    if (!memory_max->empty())
      o->rank_memory_max_bytes = launch::parse_memory_size(*memory_max).value_or_throw();
    o->stop_grace = std::chrono::milliseconds(static_cast<int64_t>(*grace_s * 1000));
    o->hang = launch::hang_policy_from_flags(hang->first, hang->second).value_or_throw();
    auto r = launch::run_launch(*o).value_or_throw();
    if (r.exit_code != 0) {
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", r.message.c_str());
      if (r.restarts > 0) std::fprintf(stderr, "(after %d restart(s))\n", r.restarts);
    }
    ctx.exit_code = r.exit_code;
  });
}

}  // namespace gpulab::cli
