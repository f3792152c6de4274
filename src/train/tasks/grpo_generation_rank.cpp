// The generation rank's loop (see grpo_generation_rank.h).
#include "train/tasks/grpo_generation_rank.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/strings.h"
#include "train/device.h"
#include "train/ops/cpu_kernels.h"
#include "train/precision.h"
#include "train/rl/grpo_weight_sync.h"
#include "train/rollout.h"
#include "train/stop_signal.h"
#include "train/tasks/grpo_rollouts.h"
#include "train/tasks/grpo_setup.h"
#include "train/test_hooks.h"

namespace gpulab::train {

namespace {

// What the generation rank holds: the options, the prompts and the policy.
struct Generator {
  const TrainOptions& opts;
  const rl::GenerationLayout& layout;
  int rank = 0;  // this generation rank's index (0..N-1)
  GrpoInputs in{};
  CausalLmPtr model{};
  int64_t per_rank = 0, steps_per_epoch = 0;
  int64_t policy_step = -1;  // optimizer steps of the weights held; -1: none received yet
};

// The trainer's runtime choices that change what a forward pass computes (kernels, threads,
// device, precision settings), so that sampling here equals sampling on a training rank.
torch::Device set_up_runtime(const TrainOptions& o, const launch::RankPlace& place) {
  set_cpu_kernels(o.cpu_kernels == "on");
  configure_threads(static_cast<int>(o.threads), place.local_world_size);
  const auto device = resolve_device(o.device, place.local_rank);
  if (o.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  configure_precision(parse_precision(o.precision), device);
  return device;
}

// Samples the shares of the training ranks this rank serves at `step`, all in one batch (each
// share drawn from the stream its rank draws from colocated), and sends each rank its own.
void serve_rollout_step(Generator& g, dist::Communicator& world, int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto served = g.layout.served_by(g.rank);
  const int trainers = g.layout.training_ranks();
  std::vector<std::vector<std::vector<int64_t>>> prompts;
  std::vector<TokenSampler> samplers;
  for (int t : served) {
    auto& share = prompts.emplace_back();
    for (int64_t p :
         grpo_step_prompts(static_cast<int64_t>(g.in.prompts.prompts.size()), g.opts.seed,
                           g.steps_per_epoch, step, t, trainers, g.per_rank))
      share.push_back(g.in.prompt_ids[static_cast<size_t>(p)]);
    samplers.emplace_back(g.in.sampling, grpo_sampler_seed(g.opts.seed, step, t, trainers));
  }
  std::vector<StepRollouts> sampled;
  {
    torch::NoGradGuard no_grad;
    sampled = rollouts_for_shares(*g.model, prompts, g.opts.group_size, g.in.sampling, samplers);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < served.size(); ++i) {
    rl::RolloutShare share;
    share.policy_step = g.policy_step;
    share.generation_seconds = seconds;
    share.completions = std::move(sampled[i].completions);
    share.log_probs = std::move(sampled[i].log_probs);
    rl::send_share(world, g.layout.world_rank_of_training(served[i]), step, share);
  }
}

// The weights training rank 0 sends, and (test hook) this rank's fingerprint of them.
void take_weights(Generator& g, dist::Communicator& sync, int64_t policy_step) {
  rl::broadcast_weights(sync, g.layout.sync_root(), *g.model);
  g.policy_step = policy_step;
  if (!test_hooks::hash_synced_weights()) return;
  auto hashes = torch::zeros({g.layout.generation_ranks() + 1}, torch::kLong);
  hashes[g.rank] = static_cast<int64_t>(rl::weights_hash(*g.model));
  sync.allreduce_sum(hashes, "weight fingerprints");
}

}  // namespace

int run_generation_rank(const TrainOptions& opts, const rl::GenerationLayout& layout,
                        const launch::RankPlace& place, dist::Communicator& world,
                        dist::Communicator& sync) {
  // Ctrl-C reaches every rank; this one keeps serving until training rank 0 has its checkpoint.
  const StopSignalGuard stop_guard;
  Generator g{opts, layout, layout.generation_index(place.rank)};
  const auto device = set_up_runtime(opts, place);
  g.in = open_grpo_inputs(opts).value_or_throw();
  g.per_rank = batch_per_process(opts, layout.training_ranks());
  g.steps_per_epoch = grpo_steps_per_epoch(static_cast<int64_t>(g.in.prompts.prompts.size()),
                                           g.per_rank, layout.training_ranks());
  g.model = build_grpo_policy(g.in, device);
  g.model->eval();
  for (auto& p : g.model->parameters()) p.set_requires_grad(false);
  std::vector<std::string> served;
  for (int t : layout.served_by(g.rank)) served.push_back(std::to_string(t));
  std::printf(
      "Generation rank %d of %d (world rank %d, pid %d) on %s: sampling for training rank(s) %s\n",
      g.rank, layout.generation_ranks(), place.rank, static_cast<int>(::getpid()),
      device.str().c_str(), join(served, ", ").c_str());
  std::fflush(stdout);
  for (;;) {
    const auto m = rl::receive_command(sync, layout);
    if (m.command == rl::LinkCommand::kWeights) take_weights(g, sync, m.value);
    if (m.command == rl::LinkCommand::kRollout) serve_rollout_step(g, world, m.value);
    if (m.command == rl::LinkCommand::kStop) break;
  }
  const int sig = stop_signal_received();
  return sig != 0 ? 128 + sig : 0;
}

}  // namespace gpulab::train
