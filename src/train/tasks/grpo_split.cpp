// GRPO's generation and training ranks: their checks and each rank's part (see grpo_split.h).
#include "train/tasks/grpo_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
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
// not land on a generation rank's GPU. `generation`: the first node's generating local ranks.
Status check_devices(const TrainOptions& o, const std::vector<int>& generation, int local_ranks) {
  // A device name this host cannot use: check_train_options or the rank itself names it.
  if (!valid_device_name(o.device) || !check_gpu_build(o.device)) return ok_status();
  try {
    (void)resolve_device(o.device, 0);
  } catch (const Exception&) {
    return ok_status();
  }
  for (int t = 0; t < local_ranks; ++t) {
    if (std::find(generation.begin(), generation.end(), t) != generation.end()) continue;
    for (int g : generation) {
      const auto gd = resolve_device(o.device, g), td = resolve_device(o.device, t);
      if (gd.is_cuda() && gd == td)
        return split_error(
            fmt::format("local rank {} (training) would share {} with local rank {} "
                        "(generation): {} local ranks on {} visible GPU(s) with --device {}",
                        t, gd.str(), g, local_ranks, torch::cuda::device_count(), o.device),
            fmt::format("give each rank its own GPU: --nproc_per_node {} or less, --device "
                        "cuda (not one GPU for all)",
                        torch::cuda::device_count()));
    }
  }
  return ok_status();
}

// --generation_gpu_ids name local ranks of the first node, each below its process count.
Status check_generation_ids(const TrainOptions& o, const std::vector<int>& ranks, int per_node) {
  if (o.generation_gpu_ids.empty()) return ok_status();
  for (int id : ranks)
    if (id >= per_node)
      return split_error(
          fmt::format("--generation_gpu_ids {}: GPU {} is not one of the first node's {} "
                      "processes' GPUs (local rank i takes GPU i)",
                      o.generation_gpu_ids, id, per_node),
          fmt::format("name GPUs 0 to {}, or pass --nproc_per_node {}", per_node - 1, id + 1));
  return ok_status();
}

// "6,7" -> {6, 7}; nullopt for anything but distinct non-negative integers.
std::optional<std::vector<int>> parse_gpu_ids(const std::string& text) {
  std::vector<int> ids;
  for (const auto& item : split(text, ',', /*skip_empty=*/false)) {
    const auto id = parse_int(trim(item));
    if (!id || *id < 0 || *id > 4096) return std::nullopt;
    ids.push_back(static_cast<int>(*id));
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty() || std::adjacent_find(ids.begin(), ids.end()) != ids.end()) return std::nullopt;
  return ids;
}

}  // namespace

Status take_generation_gpu_ids(TrainOptions& o) {
  if (o.generation_gpu_ids.empty()) return ok_status();
  const auto ids = parse_gpu_ids(o.generation_gpu_ids);
  if (!ids)
    return split_error(
        fmt::format("--generation_gpu_ids '{}' is not a list of GPU indices", o.generation_gpu_ids),
        "name distinct local GPU indices separated by commas, e.g. --generation_gpu_ids 7 or 6,7");
  const auto n = static_cast<int64_t>(ids->size());
  if (o.generation_gpus != 0 && o.generation_gpus != n)
    return split_error(fmt::format("--generation_gpus {} with --generation_gpu_ids {} ({} GPUs)",
                                   o.generation_gpus, o.generation_gpu_ids, n),
                       fmt::format("drop --generation_gpus, or pass --generation_gpus {}", n));
  o.generation_gpus = n;
  return ok_status();
}

std::vector<int> generation_world_ranks(const TrainOptions& o) {
  if (!o.generation_gpu_ids.empty()) {
    auto ids = parse_gpu_ids(o.generation_gpu_ids);
    GPULAB_ASSERT(ids.has_value(),
                  "take_generation_gpu_ids refused the list before any rank used it");
    return *ids;
  }
  std::vector<int> ranks;
  for (int r = 0; r < o.generation_gpus; ++r) ranks.push_back(r);
  return ranks;
}

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
  // World ranks 0..N-1 generate (the first local ranks of the first node(s)), or the first node's
  // local ranks --generation_gpu_ids names. Each node's GPUs are checked as its ranks take them.
  const int per_node = world / std::max(1, d.launch.nnodes);
  const auto ranks = generation_world_ranks(o);
  if (auto st = check_generation_ids(o, ranks, per_node); !st) return st;
  std::vector<int> first_node;
  for (int r : ranks)
    if (r < per_node) first_node.push_back(r);
  return check_devices(o, first_node, per_node);
}

int run_grpo_split(TrainOptions o, const dist::DistOptions& d) {
  const auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
  const rl::GenerationLayout layout(generation_world_ranks(o), place.world_size);
  dist::CommOptions co;
  co.backend = d.backend;
  co.timeout = std::chrono::milliseconds(static_cast<int64_t>(d.timeout_s * 1000));
  auto world = std::make_shared<dist::Communicator>(place, co);
  // The sync group first (the generation ranks and training rank 0), then the training group.
  if (layout.generates(place.rank)) {
    dist::Communicator sync(*world, layout.sync_group(), "grpo-sync");
    return run_generation_rank(o, layout, place, *world, sync);
  }
  const int t = layout.training_index(place.rank);
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
