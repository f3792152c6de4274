// How long Slurm gives a job: its time-limit notation (sbatch --time, squeue's time left) as
// seconds, and the time left to the job this process runs in, so a run that cannot finish in
// it says so early.
#pragma once

#include <optional>
#include <string>

namespace gpulab::launch {

// "90" (minutes), "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS" -> seconds;
// "UNLIMITED"/"INFINITE" -> infinity; nullopt for anything else.
std::optional<double> parse_slurm_duration(const std::string& text);

// Seconds left before Slurm ends this job (squeue's %L for SLURM_JOB_ID); nullopt outside a
// job, without squeue, or for a job with no limit.
std::optional<double> slurm_job_seconds_left();

}  // namespace gpulab::launch
