// `gpulab slurm submit|status|logs|cancel`: multi-node training as a Slurm batch job, written
// from the seed's request (N GPUs per node, nodes, train flags); and the job's lifecycle.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "core/error.h"
#include "slurm_cli.h"

namespace gpulab::cli {

namespace {

bool parse_count(const std::string& s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

CLI::Option* add_image_flag(CLI::App* cmd, std::string& image) {
  return cmd->add_option("--image", image,
                         "lab image: <vendor>-lab:latest unless given for containers on this "
                         "host; under Slurm a registry image or .sqsh (Pyxis) or an OCI bundle "
                         "folder (none: bare metal)");
}

void add_slurm_job_options(CLI::App* cmd, SlurmCliOptions& o, bool for_ddp) {
  const std::string g = "Slurm";
  auto& j = o.job;
  if (for_ddp) {
    cmd->add_option("--scheduler", o.scheduler,
                    "local (containers on this host, the seed's way) or slurm (an sbatch job)")
        ->check(CLI::IsMember({"local", "slurm"}))
        ->group(g)
        ->capture_default_str();
  } else {
    cmd->add_option("--nodes", j.nodes, "nodes to run on")->group(g)->capture_default_str();
    add_image_flag(cmd, j.image)->group(g);
  }
  cmd->add_option("--partition", j.partition, "partition (default: the cluster's)")->group(g);
  cmd->add_option("--time", j.time_limit, "time limit (HH:MM:SS, D-HH, minutes)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--account", j.account, "account to charge")->group(g);
  cmd->add_option("--job_name,--job-name", j.job_name, "job name")->group(g)->capture_default_str();
  cmd->add_option("--gres_name,--gres-name", j.gres_name,
                  "GRES to ask for per node (gpu, gpu:a100, ...)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--cpu_ranks_per_node,--cpu-ranks-per-node", j.cpu_ranks_per_node,
                  "CPU ranks per node and no GRES (a cluster without GPUs)")
      ->check(CLI::Range(0, 1024))
      ->group(g);
  cmd->add_option("--cpus_per_task,--cpus-per-task", j.cpus_per_task,
                  "cores per rank (srun binds each rank to them)")
      ->check(CLI::Range(0, 4096))
      ->group(g);
  cmd->add_option("--container", o.container,
                  "auto (Pyxis, else Slurm's OCI --container, when --image is given), pyxis, "
                  "oci or none (bare metal)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--mount", j.mounts, "host:container folder for the container (repeatable)")
      ->group(g);
  cmd->add_option("--output", j.output, "the job's output file (sbatch patterns)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--run_dir,--run-dir", j.run_dir, "training run folder (default runs/<job>-<id>)")
      ->group(g);
  cmd->add_option("--gpulab", j.gpulab, "gpulab as the nodes find it (a path or a name on PATH)")
      ->group(g)
      ->capture_default_str();
  cmd->add_flag("--no_requeue,--no-requeue", o.no_requeue,
                "do not requeue the job after a node failure (default: requeue, resume auto)")
      ->group(g);
  cmd->add_flag("--dry_run,--dry-run", o.dry_run, "print the sbatch script, submit nothing")
      ->group(g);
  cmd->add_flag("--test_only,--test-only", o.test_only,
                "ask sbatch --test-only whether and when the cluster would run it")
      ->group(g);
  cmd->add_option("--status", o.status, "show job JOB's state")->group(g);
  cmd->add_option("--logs", o.logs, "print job JOB's output")->group(g);
  cmd->add_option("--cancel", o.cancel, "cancel job JOB (scancel)")->group(g);
}

int run_slurm(SlurmCliOptions o, int gpus_per_node, int nodes, const std::string& train_flags) {
  if (!o.status.empty()) {
    auto s = launch::job_status(o.status).value_or_throw();
    std::cout << "job " << o.status << ": " << s.state
              << (s.reason.empty() || s.reason == "None" ? "" : " (" + s.reason + ")")
              << "\n  nodes: " << s.nodes << "\n  run time: " << s.run_time
              << "\n  exit code: " << s.exit_code << "\n  restarts: " << s.restarts
              << "\n  output: " << s.std_out << "\n";
    return 0;
  }
  if (!o.logs.empty()) {
    std::cout << launch::job_log(o.logs).value_or_throw();
    return 0;
  }
  if (!o.cancel.empty()) {
    if (auto st = launch::cancel_job(o.cancel); !st.ok()) throw Exception(st.error());
    std::cout << "cancelled job " << o.cancel << "\n";
    return 0;
  }
  auto& j = o.job;
  j.gpus_per_node = gpus_per_node;
  j.nodes = nodes;
  j.train_flags = train_flags;
  j.requeue = !o.no_requeue;
  // Detection asks srun; a dry run of a bare-metal script needs no cluster at all.
  const bool need_support = !j.image.empty() && o.container != "none";
  j.container = launch::choose_container(
                    o.container, j.image,
                    need_support ? launch::detect_container_support() : launch::ContainerSupport{})
                    .value_or_throw();
  if (j.cpus_per_task == 0) {
    // One rank per GPU, each with its share of the node's cores (Slurm's default is one).
    auto cores = launch::slurm_cores_per_node(j.partition);
    if (cores.ok())
      j.cores_per_node = *cores;
    else if (!o.dry_run && cores.error().code == Code::kUnavailable)
      throw Exception(cores.error());  // no cluster here: the submission could not go either
    else
      std::cerr << "note: no --cpus-per-task line (the node's cores are unknown: "
                << cores.error().message << "); pass --cpus_per_task to set it\n";
  }
  std::string script = launch::render_sbatch_script(j).value_or_throw();
  if (o.dry_run) {
    std::cout << script;
    return 0;
  }
  std::string answer = launch::submit_script(script, o.test_only).value_or_throw();
  if (o.test_only) {
    std::cout << answer << "\n";
  } else {
    std::cout << "Submitted batch job " << answer << "\n"
              << "  gpulab slurm status " << answer << "   gpulab slurm logs " << answer
              << "   gpulab slurm cancel " << answer << "\n";
  }
  return 0;
}

int run_slurm_seed_args(const SlurmCliOptions& o, const std::vector<std::string>& args, int nodes,
                        bool nodes_need_multi) {
  if (!(o.status + o.logs + o.cancel).empty()) return run_slurm(o, 1, 1, "");
  int gpus = 0;
  if (args.empty() || !parse_count(args.front(), gpus))
    throw Exception(Code::kInvalidArgument,
                    "the Slurm job needs N, the GPUs per node, after its options" +
                        (args.empty() ? std::string() : " (got '" + args.front() + "')"),
                    "e.g. gpulab slurm submit --nodes 2 8 script_multi_node \"--model resnet50\"");
  std::string flags;
  bool multi = false, single = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "script_multi_node" || a == "script_single_node") {
      multi = a == "script_multi_node";
      single = !multi;
      continue;
    }
    if (a == "interactive")
      throw Exception(Code::kInvalidArgument, "interactive mode is not a batch job",
                      "use `salloc` and `srun --pty`, or script_multi_node");
    if (a == "auto") continue;  // the seed's GPU auto-pick: Slurm picks the GPUs
    if (!a.empty() && a.front() != '-' && flags.empty()) {
      // The seed's MASTER_ADDR: the rendezvous is the allocation's first node instead.
      std::fprintf(stderr, "note: %s is not used; Slurm's first node hosts the rendezvous\n",
                   a.c_str());
      continue;
    }
    flags += (flags.empty() ? "" : " ") + a;
  }
  if (nodes_need_multi && !multi) nodes = 1;  // gpulab ddp: --nnodes counts in multi-node only
  if (single && nodes != 1)
    throw Exception(Code::kInvalidArgument,
                    "script_single_node with --nodes " + std::to_string(nodes),
                    "use script_multi_node, or drop --nodes");
  return run_slurm(o, gpus, nodes, flags);
}

void add_slurm_command(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "slurm", "multi-node training as a Slurm job: submit, status, logs, cancel");
  cmd->require_subcommand(1);
  auto o = std::make_shared<SlurmCliOptions>();
  auto* submit = cmd->add_subcommand(
      "submit",
      "write the sbatch script for N GPUs per node and submit it (--dry_run prints it): "
      "gpulab slurm submit [options] N [script_multi_node] [\"train flags\"]");
  submit->footer(
      "Example: gpulab slurm submit --nodes 2 --partition gpu --time 04:00:00 8 "
      "script_multi_node \"--model resnet50 --dataset cifar10 --num_epochs 30\"");
  // As for gpulab ddp: options first, then the seed's positional form, passed through as
  // written (the train flags start with "--" and are not ours to parse).
  submit->prefix_command();
  add_slurm_job_options(submit, *o, false);
  submit->callback([submit, o, &ctx] {
    ctx.exit_code = run_slurm_seed_args(*o, submit->remaining(), o->job.nodes, false);
  });
  for (const char* what : {"status", "logs", "cancel"}) {
    auto* sub = cmd->add_subcommand(
        what, std::string(what) == "status" ? "a job's state, nodes, run time and exit code"
              : std::string(what) == "logs" ? "print a job's output file"
                                            : "cancel a job (scancel)");
    auto job = std::make_shared<std::string>();
    sub->add_option("JOB", *job, "job id (as sbatch printed it)")->required();
    std::string w = what;
    sub->callback([w, job, &ctx] {
      SlurmCliOptions l;
      (w == "status" ? l.status : w == "logs" ? l.logs : l.cancel) = *job;
      ctx.exit_code = run_slurm(l, 1, 1, "");
    });
  }
}

}  // namespace gpulab::cli
