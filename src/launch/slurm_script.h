// `gpulab slurm submit` / `gpulab ddp --scheduler slurm`: turns the seed-style request (GPUs per
// node, nodes, the train flags) into an sbatch script, with GRES, time limit, partition and the
// lab image through the cluster's container support (Pyxis/enroot, or Slurm's OCI --container)
// or bare metal; and the job's lifecycle (status, logs, cancel) through Slurm's own commands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::launch {

// How the ranks reach the lab image: none (bare metal, gpulab on the nodes' PATH), pyxis
// (srun --container-image, NVIDIA's SPANK plugin with enroot), oci (srun --container=BUNDLE,
// Slurm's own OCI support, oci.conf on the nodes).
enum class ContainerKind { kNone, kPyxis, kOci };

struct SlurmJobRequest {
  int gpus_per_node = 1;  // GRES gpus, and ranks per node (one task per GPU)
  int nodes = 1;
  int cpu_ranks_per_node = 0;  // > 0: CPU ranks, no GRES (clusters without GPUs; tests)
  int cpus_per_task = 0;       // 0: cores_per_node / ranks per node, else Slurm's default
  int cores_per_node = 0;      // the partition's smallest node (sinfo), 0 when unknown
  std::string train_flags;     // as the seed passes them: one string of gpulab train flags
  std::string job_name = "gpulab-ddp";
  std::string partition;  // empty: the cluster's default
  std::string time_limit = "01:00:00";
  std::string account;
  std::string gres_name = "gpu";  // the GRES as the cluster names it ("gpu", "gpu:a100")
  std::string output = "gpulab-%x-%j.out";
  std::string run_dir;  // --output_dir of the run; empty: runs/<job name>-$SLURM_JOB_ID
  bool requeue = true;  // and --resume auto, so a requeued job continues
  std::string image;    // lab image (pyxis: registry or .sqsh; oci: bundle folder)
  ContainerKind container = ContainerKind::kNone;
  std::vector<std::string> mounts;  // host:container, passed to the container
  std::string gpulab = "gpulab";    // the program the ranks run (its path on the nodes)
};

// What this cluster's srun offers: pyxis when `srun --help` lists --container-image, oci when
// it lists --container. Used for --container auto.
struct ContainerSupport {
  bool pyxis = false;
  bool oci = false;
};
ContainerSupport detect_container_support();

// "auto" picks pyxis, then oci, for a request with an image; "none" is bare metal. An image
// that the cluster cannot run (no plugin, an OCI image that is not a bundle folder) is an error
// with what to do.
Result<ContainerKind> choose_container(const std::string& mode, const std::string& image,
                                       const ContainerSupport& support);

// The fewest CPUs of a node in the partition (the cluster's default partition when empty), as
// sinfo reports them: what --cpus-per-task is derived from.
Result<int> slurm_cores_per_node(const std::string& partition);

// Checks the request (counts, time limit form, flags that the script sets itself) and writes
// the script. Errors say which field and what to pass instead.
Result<std::string> render_sbatch_script(const SlurmJobRequest& req);

// Splits the train flags string into words (single and double quotes group, as a shell does)
// and quotes each for the script.
Result<std::vector<std::string>> split_flags(const std::string& flags);
std::string shell_quote(const std::string& word);

// Job lifecycle, through Slurm's commands on this host. A job id is digits (an array task
// "123_4" too); anything else is refused before a command runs.
Status check_job_id(const std::string& job);
struct JobStatus {
  std::string state;      // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
  std::string reason;     // why pending or failed
  std::string nodes;      // NodeList
  std::string exit_code;  // "0:0"
  std::string run_time;
  std::string std_out;  // the output file
  std::string restarts;
};
Result<JobStatus> job_status(const std::string& job);
// Seconds left before Slurm ends the job this process runs in (squeue's %L for SLURM_JOB_ID),
// so a run that cannot finish in it says so early; nullopt outside a job, without squeue, or for
// a job with no limit.
std::optional<double> slurm_job_seconds_left();
Result<std::string> job_log(const std::string& job);  // the output file's text
Status cancel_job(const std::string& job);
// Submits a script with sbatch (--test-only when test_only) and returns the job id (or, for
// --test-only, sbatch's answer: when and where it would start).
Result<std::string> submit_script(const std::string& script, bool test_only);

}  // namespace gpulab::launch
