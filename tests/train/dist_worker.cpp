// The worker dispatcher behind dist_worker.h (runs at static initialisation, before main).
#include "dist_worker.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "launch/rank_env.h"

namespace gpulab::train::testing {

namespace {

std::map<std::string, std::function<int()>>& scenarios() {
  static std::map<std::string, std::function<int()>> m;
  return m;
}

}  // namespace

DistScenario::DistScenario(const std::string& name, std::function<int()> fn) {
  scenarios()[name] = std::move(fn);
  const char* want = std::getenv("GPULAB_DIST_WORKER");
  if (!want || name != want) return;
  int code = 1;
  try {
    torch::set_num_threads(1);
    code = scenarios()[name]();
  } catch (const Exception& e) {
    std::fprintf(stderr, "rank error: %s\n", e.what());
    code = e.code() == Code::kTimeout ? 3 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank error: %s\n", e.what());
  }
  std::fflush(stdout);
  std::_Exit(code);  // skip static destructors of a half-initialised program
}

std::vector<std::vector<torch::Tensor>> run_ranks_for_tensors(
    const std::string& scenario, int n, const std::filesystem::path& dir, const std::string& prefix,
    std::map<std::string, std::string> env) {
  std::filesystem::remove_all(dir);
  auto r = run_ranks(scenario, n, dir, std::move(env));
  std::vector<std::vector<torch::Tensor>> got;
  if (r.exit_code != 0) {
    ADD_FAILURE() << r.message;
  } else {
    for (int rank = 0; rank < n; ++rank)
      got.push_back(load_tensors(dir / (prefix + std::to_string(rank) + ".pt")));
  }
  std::filesystem::remove_all(dir);
  return got;
}

launch::LaunchResult run_ranks(const std::string& scenario, int n, const std::filesystem::path& out,
                               std::map<std::string, std::string> env) {
  std::filesystem::create_directories(out);
  launch::LaunchOptions o;
  o.nproc_per_node = n;
  o.threads_per_rank = 1;
  o.verbose = false;
  o.command = {std::filesystem::read_symlink("/proc/self/exe").string()};
  o.env = std::move(env);
  o.env["GPULAB_DIST_WORKER"] = scenario;
  o.env["GPULAB_DIST_OUT"] = out.string();
  return launch::run_launch(o).value_or_throw();
}

std::filesystem::path worker_out() {
  const char* d = std::getenv("GPULAB_DIST_OUT");
  return d ? d : ".";
}

void save_tensors(const std::string& name, std::vector<torch::Tensor> t) {
  torch::save(t, (worker_out() / (name + ".pt")).string());
}

std::vector<torch::Tensor> load_tensors(const std::filesystem::path& file) {
  std::vector<torch::Tensor> t;
  torch::load(t, file.string());
  return t;
}

dist::Communicator worker_world(std::chrono::milliseconds timeout) {
  auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
  dist::CommOptions o;
  o.backend = "gloo";
  o.print_auto = false;
  o.timeout = timeout;
  return dist::Communicator(place, o);
}

double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  auto denom = b.abs().max().clamp_min(1e-12);
  return ((a - b).abs().max() / denom).item<double>();
}

}  // namespace gpulab::train::testing
