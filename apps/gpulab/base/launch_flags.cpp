// The launch flags, one row each, registered once for every command that has them.
#include "base/launch_flags.h"

#include "base/flag_table.h"

namespace gpulab::cli {
namespace {

using LaunchFlag = FlagRow<launch::LaunchFlags>;

// NOLINTBEGIN(readability-function-size): a table, one row per flag.
const std::vector<LaunchFlag>& launch_flag_table() {
  static const std::vector<LaunchFlag> table = {
      {"nproc_per_node",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd
             ->add_option("--nproc_per_node", f.nproc_per_node,
                          "ranks to start on this node (one GPU each, or a share of the CPU cores)")
             ->capture_default_str();
       }},
      {"nnodes",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd->add_option("--nnodes", f.nnodes, "nodes in the job")->capture_default_str();
       }},
      {"node_rank",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd
             ->add_option("--node_rank", f.node_rank, "this node's index (0 hosts the rendezvous)")
             ->capture_default_str();
       }},
      {"master_addr",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd->add_option("--master_addr", f.master_addr,
                                "address of node 0 (default 127.0.0.1)");
       }},
      {"master_port",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd->add_option(
             "--master_port", f.master_port,
             "rendezvous port (default: a free port on one node, 29500 on several or in lab "
             "containers)");
       }},
      {"max_restarts",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd
             ->add_option(
                 "--max_restarts", f.max_restarts,
                 "restart all ranks after a failure, K times (gpulab train resumes from the "
                 "newest checkpoint)")
             ->capture_default_str();
       }},
      {"heartbeat_timeout",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd
             ->add_option(
                 "--heartbeat_timeout", f.heartbeat_timeout,
                 "when a rank that runs but makes no progress (gpulab train: a training or "
                 "evaluation batch, a collective; another command: a write to "
                 "$GPULAB_HEARTBEAT_FILE) is hung and the job stopped: auto (a rank silent for "
                 "longer than 10 x its slowest phase, and at least --heartbeat_floor, once it "
                 "has done a few steps), seconds (a fixed limit), or 0 (off)")
             ->capture_default_str();
       }},
      {"heartbeat_floor",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd
             ->add_option(
                 "--heartbeat_floor", f.heartbeat_floor_s,
                 "seconds of silence that --heartbeat_timeout auto always allows (raise it "
                 "when checkpoints take longer to write)")
             ->capture_default_str();
       }},
      {"rank_memory_max",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd->add_option(
             "--rank_memory_max", f.rank_memory_max,
             "memory cap of each rank (e.g. 300M, 2G): every rank runs in its own cgroup "
             "(v2, else v1 memory controller) and one that outgrows it is ended by the "
             "kernel's OOM killer, which the launcher reports (even with one rank)");
       }},
      {"stop_grace",
       [](CLI::App* cmd, launch::LaunchFlags& f) {
         return cmd
             ->add_option("--stop_grace", f.stop_grace_s,
                          "seconds between the stop signal (SIGTERM, or the user's SIGINT) and "
                          "SIGKILL when stopping the ranks (0 to 60)")
             ->capture_default_str();
       }},
  };
  return table;
}
// NOLINTEND(readability-function-size)

}  // namespace

void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, const std::vector<std::string>& only,
                      const std::string& group) {
  for (CLI::Option* opt : add_flag_rows(cmd, f, launch_flag_table(), only)) opt->group(group);
}

void add_launch_flags(CLI::App* cmd, launch::LaunchFlags& f, LaunchFlagSet set,
                      const std::string& group) {
  if (set == LaunchFlagSet::kAll)
    return add_launch_flags(cmd, f, std::vector<std::string>{}, group);
  add_launch_flags(cmd, f, {"nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port"},
                   group);
}

}  // namespace gpulab::cli
