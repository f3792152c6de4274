// GRPO with generation ranks of its own (`--generation_gpus N`, docs/rl.md): the checks the
// launcher runs before any rank starts, and what each rank of such a job runs: world ranks
// 0..N-1 (or the local ranks `--generation_gpu_ids` names on the first node) generate
// (train/tasks/grpo_generation_rank.h), the others train as their own data-parallel group (DDP or
// --shard over that group only) with rollouts from the generation ranks
// (train/tasks/grpo_rollout_source.h).
#pragma once

#include <vector>

#include "core/result.h"
#include "train/dist/dist_options.h"
#include "train/train_options.h"

namespace gpulab::train {

// Reads --generation_gpu_ids ("7", "6,7") into --generation_gpus's count. kInvalidArgument
// naming the flag for a list that is not distinct non-negative integers, or whose length differs
// from a --generation_gpus given beside it.
Status take_generation_gpu_ids(TrainOptions& o);

// The world ranks that generate: --generation_gpu_ids' (the first node's local ranks are world
// ranks 0..), else 0..--generation_gpus-1; ascending. Empty when there are none. Call it after
// take_generation_gpu_ids accepted the list.
std::vector<int> generation_world_ranks(const TrainOptions& o);

// kInvalidArgument naming the numbers, for --generation_gpus with `world` processes: another
// task, a single process, no training rank left, or a GPU that a
// generation rank and a training rank would share, or --generation_gpu_ids beyond the first
// node's processes.
Status check_generation_split(const TrainOptions& o, const dist::DistOptions& d, int world);

// Runs this rank's part (generation or training); returns the process's exit code. Throws
// gpulab::Exception when rendezvous or a collective fails.
int run_grpo_split(TrainOptions o, const dist::DistOptions& d);

}  // namespace gpulab::train
