// Multi-process DDP tests run their ranks as this same test binary: the parent starts N copies
// through the real launcher with GPULAB_DIST_WORKER=<scenario>; before GoogleTest starts, each
// copy runs the scenario as one rank, writes its tensors to GPULAB_DIST_OUT and exits.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "launch/launcher.h"
#include "train/dist/communicator.h"

namespace gpulab::train::testing {

// Registers a scenario (static initialisation); runs it instead of the tests when the env asks.
struct DistScenario {
  DistScenario(const std::string& name, std::function<int()> fn);
};

// Starts `n` ranks of `scenario`; returns the launch result (ranks write into `out`).
launch::LaunchResult run_ranks(const std::string& scenario, int n, const std::filesystem::path& out,
                               std::map<std::string, std::string> env = {});

// Runs `n` ranks of `scenario` in a fresh `dir` and returns what each saved as
// `<prefix><rank>.pt` (empty after an ADD_FAILURE naming the launch's message); removes `dir`.
std::vector<std::vector<torch::Tensor>> run_ranks_for_tensors(
    const std::string& scenario, int n, const std::filesystem::path& dir, const std::string& prefix,
    std::map<std::string, std::string> env = {});

// Rank-side helpers: the output folder, and tensors saved/loaded by name.
std::filesystem::path worker_out();
void save_tensors(const std::string& name, std::vector<torch::Tensor> t);
std::vector<torch::Tensor> load_tensors(const std::filesystem::path& file);

// This rank's world over Gloo, as the launcher placed it (quiet, 60 s per collective unless
// `timeout` says otherwise).
dist::Communicator worker_world(std::chrono::milliseconds timeout = std::chrono::seconds(60));

// max |a - b| / max(|b|, 1e-12) over all elements.
double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace gpulab::train::testing
