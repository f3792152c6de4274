// `gpulab ddp N [mode] [MASTER_ADDR] ["train flags"]`: the seed's run-ddp.sh, on gpulab.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/launch_flags.h"
#include "base/slurm_cli.h"
#include "builder/ddp.h"
#include "commands.h"

namespace gpulab::cli {
namespace {

// --nnodes, --node_rank and --master_port as `gpulab launch` declares them; the --node_rank
// option (its count tells whether it was given).
CLI::Option* add_launch_flags_for_ddp(CLI::App* cmd, launch::LaunchFlags& f) {
  add_launch_flags(cmd, f, std::vector<std::string>{"nnodes", "node_rank", "master_port"});
  return cmd->get_option("--node_rank");
}

}  // namespace

void add_ddp_command(CLI::App& app, CommandContext& ctx) {
  auto opts = std::make_shared<builder::DdpOptions>();
  auto* cmd = app.add_subcommand(
      "ddp",
      "distributed training in a lab container: gpulab ddp N [interactive|script_single_node|"
      "script_multi_node] [MASTER_ADDR] [\"train flags\"]");
  // Everything from N on is the seed's positional form, passed through as written.
  cmd->prefix_command();
  add_image_flag(cmd, opts->image);
  cmd->add_option("--data", opts->data_dir, "host data folder, mounted at /workspace/data")
      ->capture_default_str();
  cmd->add_option("--log", opts->log_dir, "host log folder, mounted at /workspace/log")
      ->capture_default_str();
  // The launch table's flags, with the seed's defaults (two nodes, port 29500).
  auto launch = std::make_shared<launch::LaunchFlags>();
  launch->nnodes = opts->nnodes;
  launch->master_port = opts->master_port;
  auto* node_rank_opt = add_launch_flags_for_ddp(cmd, *launch);
  cmd->add_option("--ssh_port_base,--ssh-port-base", opts->ssh_port_base,
                  "SSH ports start above this")
      ->capture_default_str();
  cmd->add_option("--docker_host,--docker-host", opts->docker_host,
                  "engine URL (default: $DOCKER_HOST)");
  cmd->add_option("--detect_root,--detect-root", opts->detect_root,
                  "captured tree for GPU detection");
  cmd->add_option("--service", opts->service_url,
                  "gpulab serve URL to book GPUs and the SSH port through (default: "
                  "http://127.0.0.1:8000 when a service answers there)")
      ->envname("GPULAB_SERVICE");
  cmd->add_option("--token", opts->token, "API token for --service")->envname("GPULAB_TOKEN");
  cmd->add_flag("--no_service,--no-service", opts->no_service,
                "allocate directly on the engine even when gpulab serve runs");
  auto slurm = std::make_shared<SlurmCliOptions>();
  add_slurm_job_options(cmd, *slurm, true);
  cmd->callback([cmd, opts, slurm, launch, node_rank_opt, &ctx] {
    opts->nnodes = launch->nnodes;
    opts->master_port = launch->master_port;
    // Not given: -1, node 0 when MASTER_ADDR is this host (the seed's rule).
    if (node_rank_opt->count() > 0) opts->node_rank = launch->node_rank;
    if (slurm->scheduler == "slurm" || !(slurm->status + slurm->logs + slurm->cancel).empty()) {
      slurm->job.image = opts->image;
      ctx.exit_code = run_slurm_seed_args(*slurm, cmd->remaining(), opts->nnodes, true);
      return;
    }
    auto parsed = builder::parse_ddp_args(cmd->remaining(), *opts);
    auto res = builder::run_ddp(parsed, std::cout);
    ctx.exit_code = res.exit_code;
  });
}

}  // namespace gpulab::cli
