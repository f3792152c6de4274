// The sbatch script gpulab writes, and the Slurm commands behind status, logs and cancel.
#include "launch/slurm_script.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/strings.h"
#include "core/subprocess.h"
#include "launch/slurm_time.h"

namespace gpulab::launch {

namespace {

Error bad(const std::string& what, const std::string& hint) {
  return Error{Code::kInvalidArgument, what, hint};
}

// Flags the script sets from the request: passing them in the train flags too would conflict.
const char* const kOwnFlags[] = {"--nproc_per_node", "--nnodes",      "--node_rank",
                                 "--master_addr",    "--master_port", "--output_dir"};

// The words of sbatch, squeue, sinfo, ... when this machine has no Slurm configuration or cannot
// reach the controller.
bool no_cluster(const std::string& err) {
  for (const char* sign :
       {"Could not establish a configuration source", "Unable to process configuration file",
        "Unable to contact slurm controller"})
    if (err.find(sign) != std::string::npos) return true;
  return false;
}

Result<ProcessResult> slurm_command(const std::vector<std::string>& argv,
                                    const std::string& stdin_data = {}) {
  RunOptions o;
  o.stdin_data = stdin_data;
  o.timeout = std::chrono::seconds(60);
  auto r = run_process(argv, o);
  if (!r.ok())
    return Error{Code::kUnavailable, argv[0] + " could not be run: " + r.error().message,
                 "run this on a host with Slurm's client commands (Debian: slurm-client)"};
  // Every Slurm command says the same when this machine is not part of a cluster: one error
  // for all of them, not each caller's guess (a refused script, an unknown job).
  if (!r->success() && no_cluster(r->err)) {
    const auto last = r->err.rfind(argv[0] + ":");  // its final line says it best
    const std::string said = trim(last == std::string::npos ? r->err : r->err.substr(last));
    return Error{Code::kUnavailable, "no Slurm cluster answers from this machine (" + said + ")",
                 "run it on a login node of the cluster (its slurm.conf, or SLURM_CONF, and "
                 "slurmctld reachable), or print the script with --dry-run"};
  }
  return r;
}

}  // namespace

std::string shell_quote(const std::string& word) {
  static const std::regex plain("^[A-Za-z0-9_./:=,+@%-]+$");
  if (std::regex_match(word, plain)) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<std::vector<std::string>> split_flags(const std::string& flags) {
  auto words = split_shell_words(flags);
  if (!words)
    return bad("the train flags '" + flags + "' have an unclosed quote", "close the quote");
  return std::move(*words);
}

ContainerSupport detect_container_support() {
  ContainerSupport s;
  auto r = run_process({"srun", "--help"});
  if (!r.ok()) return s;
  const std::string text = r->out + r->err;
  s.pyxis = text.find("--container-image") != std::string::npos;
  s.oci = std::regex_search(text, std::regex("--container[ =]"));
  return s;
}

Result<ContainerKind> choose_container(const std::string& mode, const std::string& image,
                                       const ContainerSupport& support) {
  if (mode == "none") return ContainerKind::kNone;
  if (mode != "auto" && mode != "pyxis" && mode != "oci")
    return bad("--container " + mode + " is not one of auto, pyxis, oci, none",
               "auto uses the cluster's container support when --image is given");
  if (image.empty()) {
    if (mode == "auto") return ContainerKind::kNone;
    return bad("--container " + mode + " needs --image", "pass the lab image with --image");
  }
  if (mode == "pyxis" || (mode == "auto" && support.pyxis)) {
    if (!support.pyxis && mode == "pyxis")
      return bad("this cluster's srun has no --container-image (Pyxis is not installed)",
                 "ask the admin for Pyxis/enroot, use --container oci, or --container none");
    return ContainerKind::kPyxis;
  }
  if (mode == "oci" || support.oci) {
    if (!support.oci)
      return bad("this cluster's srun has no --container (Slurm's OCI support)",
                 "use --container pyxis where Pyxis is installed, or --container none");
    if (image.find("://") != std::string::npos || image.front() != '/')
      return bad("--image " + image +
                     " is not an OCI bundle folder; Slurm's --container runs "
                     "an unpacked bundle (a folder with config.json and rootfs)",
                 "unpack the lab image on shared storage (e.g. with umoci or skopeo) and pass "
                 "its absolute path");
    return ContainerKind::kOci;
  }
  return bad("--image " + image +
                 " was given but this cluster runs no containers (srun has "
                 "neither --container-image nor --container)",
             "drop --image to run gpulab installed on the nodes (bare metal)");
}

namespace {

// Every check of a job request; the train flags as words when it passes.
Result<std::vector<std::string>> checked_train_words(const SlurmJobRequest& r) {
  if (r.nodes < 1 || r.nodes > 65536)
    return bad("--nodes " + std::to_string(r.nodes) + " is out of range 1..65536", "");
  if (r.cpu_ranks_per_node <= 0 && (r.gpus_per_node < 1 || r.gpus_per_node > 64))
    return bad("GPUs per node " + std::to_string(r.gpus_per_node) + " is out of range 1..64",
               "N is the GPUs of each node (the seed's `run-ddp.sh N`)");
  if (r.cpu_ranks_per_node > 1024)
    return bad("--cpu-ranks-per-node " + std::to_string(r.cpu_ranks_per_node) + " is too many", "");
  if (!parse_slurm_duration(r.time_limit))
    return bad("--time " + r.time_limit + " is not a Slurm time limit",
               "use minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]] (e.g. 02:00:00 or 1-00)");
  static const std::regex name_re("^[A-Za-z0-9_.+-]{1,64}$");
  for (auto [what, v] : {std::pair{"--job-name", r.job_name},
                         {"--partition", r.partition},
                         {"--account", r.account}}) {
    if (!v.empty() && !std::regex_match(v, name_re))
      return bad(std::string(what) + " '" + v + "' has characters Slurm does not take here",
                 "use letters, digits and _ . + -");
  }
  if (r.output.empty() || !std::regex_match(r.output, std::regex(R"(^[^\s'"\\]+$)")))
    return bad("--output '" + r.output + "' is not a file name sbatch takes on its line",
               "use a path without spaces or quotes (sbatch patterns such as %x-%j are fine)");
  if (!std::regex_match(r.gres_name, std::regex("^[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?$")))
    return bad("--gres-name '" + r.gres_name + "' is not a GRES name", "e.g. gpu or gpu:a100");
  auto words = split_flags(r.train_flags);
  if (!words.ok()) return words.error();
  for (const auto& w : *words)
    for (const char* own : kOwnFlags)
      if (w == own || w.rfind(std::string(own) + "=", 0) == 0)
        return bad(std::string("the train flags set ") + own +
                       ", which the Slurm script decides (ranks come from the allocation)",
                   "drop it from the train flags; use --nodes, N (GPUs per node) or --run-dir");
  return words;
}

}  // namespace

Result<std::string> render_sbatch_script(const SlurmJobRequest& r) {
  auto words = checked_train_words(r);
  if (!words.ok()) return words.error();
  const bool cpu = r.cpu_ranks_per_node > 0;
  const int per_node = cpu ? r.cpu_ranks_per_node : r.gpus_per_node;
  // Each rank its share of the node's cores, when the request does not say.
  const int cpus_per_task = r.cpus_per_task > 0    ? r.cpus_per_task
                            : r.cores_per_node > 0 ? std::max(1, r.cores_per_node / per_node)
                                                   : 0;
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "# Written by gpulab: " << per_node << (cpu ? " CPU rank(s)" : " GPU(s)") << " on each of "
    << r.nodes << " node(s), one task per " << (cpu ? "rank" : "GPU (each task is one rank)")
    << ";\n# rendezvous on the allocation's first node (gpulab reads it from SLURM_*).\n";
  if (!cpu)
    s << "# No per-task GPU binding: every rank sees all of its node's GPUs and local rank i\n"
         "# uses GPU i, so NCCL keeps the direct GPU-to-GPU paths (NVLink, xGMI) inside a node.\n";
  s << "#SBATCH --job-name=" << r.job_name << "\n";
  s << "#SBATCH --nodes=" << r.nodes << "\n";
  s << "#SBATCH --ntasks-per-node=" << per_node << "\n";
  if (!cpu) s << "#SBATCH --gres=" << r.gres_name << ":" << r.gpus_per_node << "\n";
  if (cpus_per_task > 0) s << "#SBATCH --cpus-per-task=" << cpus_per_task << "\n";
  s << "#SBATCH --time=" << r.time_limit << "\n";
  if (!r.partition.empty()) s << "#SBATCH --partition=" << r.partition << "\n";
  if (!r.account.empty()) s << "#SBATCH --account=" << r.account << "\n";
  s << "#SBATCH --output=" << r.output << "\n";
  if (r.requeue) s << "#SBATCH --requeue\n#SBATCH --open-mode=append\n";
  s << "set -euo pipefail\n";
  // Stable across a requeue (the job keeps its id), so --resume auto finds the checkpoints.
  s << "RUN_DIR="
    << (r.run_dir.empty() ? "runs/" + r.job_name + "-${SLURM_JOB_ID}" : shell_quote(r.run_dir))
    << "\n";
  s << "echo \"gpulab: job ${SLURM_JOB_ID} on ${SLURM_JOB_NODELIST}"
       " (restart ${SLURM_RESTART_COUNT:-0}), run folder ${RUN_DIR}\"\n";
  // One rank failing ends the step (--kill-on-bad-exit); scancel and node failures end it too.
  s << "srun --kill-on-bad-exit=1";
  if (cpus_per_task > 0) s << " --cpu-bind=cores";
  if (r.container == ContainerKind::kPyxis) {
    s << " --container-image=" << shell_quote(r.image) << " --container-workdir=\"$PWD\"";
    std::string mounts = "\"$PWD\":\"$PWD\"";
    for (const auto& m : r.mounts) mounts += "," + shell_quote(m);
    s << " --container-mounts=" << mounts;
  } else if (r.container == ContainerKind::kOci) {
    s << " --container=" << shell_quote(r.image);
  }
  s << " \\\n  " << shell_quote(r.gpulab) << " train";
  for (const auto& w : *words) s << " " << shell_quote(w);
  if (r.requeue) {
    bool has_resume = false;
    for (const auto& w : *words) has_resume |= w == "--resume" || w.rfind("--resume=", 0) == 0;
    if (!has_resume) s << " --resume auto";
  }
  s << " \\\n  --output_dir \"$RUN_DIR\"\n";
  return s.str();
}

Status check_job_id(const std::string& job) {
  if (!std::regex_match(job, std::regex(R"(^\d{1,12}(_\d{1,9})?$)")))
    return bad("'" + job + "' is not a Slurm job id", "pass the number sbatch printed, e.g. 1234");
  return ok_status();
}

Result<JobStatus> job_status(const std::string& job) {
  if (auto st = check_job_id(job); !st.ok()) return st.error();
  auto r = slurm_command({"scontrol", "show", "job", "-o", job});
  if (!r.ok()) return r.error();
  if (!r->success())
    return Error{Code::kNotFound, "Slurm knows no job " + job + ": " + trim(r->err),
                 "finished jobs leave the controller after MinJobAge; see sacct -j " + job};
  JobStatus s;
  auto field = [&](const std::string& key) {
    std::smatch m;
    std::regex re("(^| )" + key + "=([^ ]*)");
    return std::regex_search(r->out, m, re) ? m[2].str() : std::string();
  };
  s.state = field("JobState");
  s.reason = field("Reason");
  s.nodes = field("NodeList");
  s.exit_code = field("ExitCode");
  s.run_time = field("RunTime");
  s.std_out = field("StdOut");
  s.restarts = field("Restarts");
  return s;
}

std::optional<double> slurm_job_seconds_left() {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return std::nullopt;
  auto r = slurm_command({"squeue", "-h", "-j", job, "-o", "%L"});
  if (!r.ok() || !r->success()) return std::nullopt;
  auto seconds = parse_slurm_duration(trim(r->out));
  if (!seconds || std::isinf(*seconds)) return std::nullopt;
  return seconds;
}

Result<std::string> job_log(const std::string& job) {
  auto s = job_status(job);
  if (!s.ok()) return s.error();
  std::ifstream in(s->std_out);
  if (!in)
    return Error{Code::kNotFound, "job " + job + "'s output " + s->std_out + " cannot be read here",
                 "read it on a host that mounts that folder (it is written by the first node)"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Status cancel_job(const std::string& job) {
  if (auto st = check_job_id(job); !st.ok()) return st.error();
  auto r = slurm_command({"scancel", job});
  if (!r.ok()) return r.error();
  if (!r->success())
    return Error{Code::kUnavailable, "scancel " + job + " failed: " + trim(r->err),
                 "check the id with `gpulab slurm status " + job + "`"};
  return ok_status();
}

Result<std::string> submit_script(const std::string& script, bool test_only) {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  if (test_only) argv = {"sbatch", "--test-only"};
  auto r = slurm_command(argv, script);
  if (!r.ok()) return r.error();
  if (!r->success())
    return Error{Code::kInvalidArgument, "sbatch refused the script: " + trim(r->err),
                 "print it with --dry-run and check the partition, GRES and time limit"};
  // --test-only answers on stderr ("sbatch: Job 3 to start at ... using 4 processors on ...").
  return trim(test_only ? r->err + r->out : r->out);
}

Result<int> slurm_cores_per_node(const std::string& partition) {
  std::vector<std::string> argv{"sinfo", "-h", "-o", "%c"};
  if (!partition.empty()) argv.insert(argv.end(), {"-p", partition});
  auto r = slurm_command(argv);
  if (!r.ok()) return r.error();
  if (!r->success())
    return Error{Code::kUnavailable, "sinfo failed: " + trim(r->err),
                 "pass --cpus_per_task, or run this where the cluster answers sinfo"};
  int fewest = 0;
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    if (line.empty()) continue;
    // "%c" is a node's CPU count, or "min+" when the partition's nodes differ.
    if (line.back() == '+') line.pop_back();
    if (line.empty() || line.find_first_not_of("0123456789") != std::string::npos ||
        line.size() > 6)
      continue;
    const int n = std::stoi(line);
    if (n > 0 && (fewest == 0 || n < fewest)) fewest = n;
  }
  if (fewest == 0)
    return Error{Code::kUnavailable,
                 "sinfo lists no node" + (partition.empty() ? "" : " in partition " + partition),
                 "check --partition, or pass --cpus_per_task"};
  return fewest;
}

}  // namespace gpulab::launch
