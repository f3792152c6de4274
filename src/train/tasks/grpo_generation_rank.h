// A GRPO generation rank (`--generation_gpus N`, docs/rl.md): holds the policy for sampling only
// (no optimizer, no gradients) and serves training rank 0's commands until it says stop: takes
// the weights it sends, and for each rollout step samples the share of every training rank it
// serves (all of them in one batch through generate_groups, each share drawn from the stream that
// training rank would draw from colocated) and sends each its completions with the policy step
// that made them.
#pragma once

#include "launch/rank_env.h"
#include "train/dist/communicator.h"
#include "train/rl/grpo_rollout_link.h"
#include "train/train_options.h"

namespace gpulab::train {

// Runs until the stop command; returns the process's exit code (128 + the signal when the
// launcher passed on a Ctrl-C, which training rank 0 answers with a checkpoint and the stop).
// Throws gpulab::Exception when a collective fails (a training rank died).
int run_generation_rank(const TrainOptions& opts, const rl::GenerationLayout& layout,
                        const launch::RankPlace& place, dist::Communicator& world,
                        dist::Communicator& sync);

}  // namespace gpulab::train
