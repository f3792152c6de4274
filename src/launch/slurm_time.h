// How long Slurm gives a job: its time-limit notation (sbatch --time, squeue's time left) as
// seconds.
#pragma once

#include <optional>
#include <string>

namespace gpulab::launch {

// "90" (minutes), "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS" -> seconds;
// "UNLIMITED"/"INFINITE" -> infinity; nullopt for anything else.
std::optional<double> parse_slurm_duration(const std::string& text);

}  // namespace gpulab::launch
