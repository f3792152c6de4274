// GRPO with generation ranks of its own (`--generation_gpus N`, docs/rl.md): the checks the
// launcher runs before any rank starts, and what each rank of such a job runs: world ranks
// 0..N-1 generate (train/tasks/grpo_generation_rank.h), the others train as their own
// data-parallel group (DDP or --shard over that group only) with rollouts from the generation
// ranks (train/tasks/grpo_rollout_source.h).
#pragma once

#include "core/result.h"
#include "train/dist/dist_options.h"
#include "train/train_options.h"

namespace gpulab::train {

// kInvalidArgument naming the numbers, for --generation_gpus with `world` processes: another
// task, a single process, no training rank left, or a GPU that a
// generation rank and a training rank would share.
Status check_generation_split(const TrainOptions& o, const dist::DistOptions& d, int world);

// Runs this rank's part (generation or training); returns the process's exit code. Throws
// gpulab::Exception when rendezvous or a collective fails.
int run_grpo_split(TrainOptions o, const dist::DistOptions& d);

}  // namespace gpulab::train
