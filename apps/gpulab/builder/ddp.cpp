// `gpulab ddp N [mode] [MASTER_ADDR] ["train flags"]`: the seed's run-ddp.sh, on gpulab.
#include <iostream>
#include <memory>

#include "base/slurm_cli.h"
#include "builder/ddp.h"
#include "commands.h"

namespace gpulab::cli {

void add_ddp_command(CLI::App& app, CommandContext& ctx) {
  auto opts = std::make_shared<builder::DdpOptions>();
  auto* cmd = app.add_subcommand(
      "ddp",
      "distributed training in a lab container: gpulab ddp N [interactive|script_single_node|"
      "script_multi_node] [MASTER_ADDR] [\"train flags\"]");
  // Everything from N on is the seed's positional form, passed through as written.
  cmd->prefix_command();
  cmd->add_option("--image", opts->image, "lab image (default: <vendor>-lab:latest)");
  cmd->add_option("--data", opts->data_dir, "host data folder, mounted at /workspace/data")
      ->capture_default_str();
  cmd->add_option("--log", opts->log_dir, "host log folder, mounted at /workspace/log")
      ->capture_default_str();
  cmd->add_option("--node_rank", opts->node_rank, "this node's rank (multi-node)");
  cmd->add_option("--nnodes", opts->nnodes, "number of nodes (multi-node)")->capture_default_str();
  cmd->add_option("--master_port", opts->master_port, "rendezvous port")->capture_default_str();
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
  cmd->callback([cmd, opts, slurm, &ctx] {
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
