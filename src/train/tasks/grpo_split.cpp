// GRPO's generation and training ranks: their checks and each rank's part (see grpo_split.h).
#include "train/tasks/grpo_split.h"

#include <fmt/format.h>

#include <algorithm>

#include "launch/rank_env.h"
#include "train/device.h"
#include "train/dist/shard_context.h"
#include "train/tasks/grpo_generation_rank.h"
#include "train/tasks/grpo_rollout_source.h"
#include "train/trainer.h"

namespace gpulab::train {

namespace {

Error split_error(std::string message, std::string hint) {
  return Error{Code::kInvalidArgument, std::move(message), std::move(hint)};
}

// On GPUs, local rank i takes the i-th visible GPU (or --device cuda:K's): a training rank must
// not land on a generation rank's GPU.
Status check_devices(const TrainOptions& o, int generation, int local_ranks) {
  // A device name this host cannot use: check_train_options or the rank itself names it.
  if (!valid_device_name(o.device) || !check_gpu_build(o.device)) return ok_status();
  try {
    (void)resolve_device(o.device, 0);
  } catch (const Exception&) {
    return ok_status();
  }
  for (int t = generation; t < local_ranks; ++t)
    for (int g = 0; g < generation; ++g) {
      const auto gd = resolve_device(o.device, g), td = resolve_device(o.device, t);
      if (gd.is_cuda() && gd == td)
        return split_error(
            fmt::format("training rank {} (local rank {}) would share {} with generation rank {}: "
                        "{} local ranks on {} visible GPU(s) with --device {}",
                        t - generation, t, gd.str(), g, local_ranks, torch::cuda::device_count(),
                        o.device),
            fmt::format("give each rank its own GPU: --nproc_per_node {} or less, --device "
                        "cuda (not one GPU for all)",
                        torch::cuda::device_count()));
    }
  return ok_status();
}

}  // namespace

Status check_generation_split(const TrainOptions& o, const dist::DistOptions& d, int world) {
  const int64_t n = o.generation_gpus;
  if (o.overlap_generation && n == 0)
    return split_error(
        "--overlap_generation needs generation ranks of their own: a colocated rank cannot sample "
        "and train at once",
        "add --generation_gpus 1 (and one more process for it), or drop --overlap_generation");
  if (n == 0) return ok_status();
  if (o.task != "grpo")
    return split_error("--generation_gpus is for --task grpo (ranks that sample rollouts)",
                       "drop --generation_gpus, or pass --task grpo");
  if (world <= 1)
    return split_error(
        fmt::format("--generation_gpus {} with a single process: the generation ranks are "
                    "processes of their own beside the training ones",
                    n),
        fmt::format("pass --nproc_per_node {} or more ({} generating, the rest training)", n + 1,
                    n));
  if (n >= world)
    return split_error(
        fmt::format("--generation_gpus {} of {} processes leaves no training rank", n, world),
        fmt::format("pass --nproc_per_node {} or more, or --generation_gpus {} or "
                    "fewer",
                    n + 1, world - 1));
  // World ranks 0..N-1 generate: the first local ranks of the first node(s), so on every node
  // the generation ranks, if any, hold its first GPUs.
  const int per_node = world / std::max(1, d.launch.nnodes);
  return check_devices(o, static_cast<int>(std::min<int64_t>(n, per_node)), per_node);
}

int run_grpo_split(TrainOptions o, const dist::DistOptions& d) {
  const auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
  const rl::GenerationLayout layout{static_cast<int>(o.generation_gpus), place.world_size};
  dist::CommOptions co;
  co.backend = d.backend;
  co.timeout = std::chrono::milliseconds(static_cast<int64_t>(d.timeout_s * 1000));
  auto world = std::make_shared<dist::Communicator>(place, co);
  // The sync group first (the generation ranks and training rank 0), then the training group.
  if (layout.generates(place.rank)) {
    dist::Communicator sync(*world, layout.sync_group(), "grpo-sync");
    return run_generation_rank(o, layout, place, *world, sync);
  }
  const int t = place.rank - layout.generation_ranks;
  std::shared_ptr<dist::Communicator> sync;
  if (t == 0) sync = std::make_shared<dist::Communicator>(*world, layout.sync_group(), "grpo-sync");
  auto training =
      std::make_shared<dist::Communicator>(*world, layout.training_group(), "grpo-train");
  auto ctx = dist::make_dist_context(d, training);
  ctx->rollout_source = std::make_shared<RolloutSource>(layout, t, world, sync);
  // ZeRO-3 holds shards between forwards: the whole parameters are gathered for each sync.
  if (auto* shard = dynamic_cast<dist::ShardContext*>(ctx.get()); shard && d.shard == "full")
    ctx->rollout_source->set_gather([shard] { shard->sharded()->gather_all(); });
  // A rank restarted by the launcher (--max_restarts) continues from the newest checkpoint.
  if (o.resume.empty() && dist::restarted()) o.resume = "auto";
  Trainer trainer(o, ctx);
  const int sig = trainer.run().stop_signal;
  ctx->rollout_source->stop();
  return sig != 0 ? 128 + sig : 0;
}

}  // namespace gpulab::train
