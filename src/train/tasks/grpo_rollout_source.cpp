// A training rank's end of the generation ranks' link (see grpo_rollout_source.h).
#include "train/tasks/grpo_rollout_source.h"

#include <string>

#include "core/error.h"
#include "train/rl/grpo_weight_sync.h"
#include "train/test_hooks.h"

namespace gpulab::train {

RolloutSource::RolloutSource(const rl::GenerationLayout& layout, int training_rank,
                             std::shared_ptr<dist::Communicator> world,
                             std::shared_ptr<dist::Communicator> sync)
    : layout_(layout),
      training_rank_(training_rank),
      world_(std::move(world)),
      sync_(std::move(sync)) {}

std::vector<uint64_t> RolloutSource::send_weights(torch::nn::Module& model, int64_t policy_step) {
  if (gather_) gather_();
  if (!sync_) return {};
  rl::send_command(*sync_, layout_, {rl::LinkCommand::kWeights, policy_step});
  rl::broadcast_weights(*sync_, layout_.sync_root(), model);
  if (!test_hooks::hash_synced_weights()) return {};
  // Each generation rank fills its own slot; the sum gathers them (the others add 0).
  auto hashes = torch::zeros({layout_.generation_ranks() + 1}, torch::kLong);
  sync_->allreduce_sum(hashes, "weight fingerprints");
  std::vector<uint64_t> out;
  for (int g = 0; g < layout_.generation_ranks(); ++g)
    out.push_back(static_cast<uint64_t>(hashes[g].item<int64_t>()));
  return out;
}

void RolloutSource::request(int64_t step) {
  if (pending_ >= 0)
    throw Exception(Code::kInternal, "rollout step " + std::to_string(step) +
                                         " asked for while step " + std::to_string(pending_) +
                                         " is not received yet");
  if (sync_) rl::send_command(*sync_, layout_, {rl::LinkCommand::kRollout, step});
  pending_ = step;
}

rl::RolloutShare RolloutSource::receive(int64_t step) {
  if (pending_ != step) request(step);
  auto share = rl::receive_share(
      *world_, layout_.world_rank_of_generation(layout_.server_of(training_rank_)), step);
  pending_ = -1;
  return share;
}

void RolloutSource::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (pending_ >= 0) (void)receive(pending_);
  if (sync_) rl::send_command(*sync_, layout_, {rl::LinkCommand::kStop, 0});
}

}  // namespace gpulab::train
