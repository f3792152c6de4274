// The generation ranks' layout and messages (see grpo_rollout_link.h).
#include "train/rl/grpo_rollout_link.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace gpulab::train::rl {

GenerationLayout::GenerationLayout(std::vector<int> generators, int world)
    : generators_(std::move(generators)), world_(world) {
  GPULAB_ASSERT(
      std::is_sorted(generators_.begin(), generators_.end()) &&
          std::adjacent_find(generators_.begin(), generators_.end()) == generators_.end() &&
          (generators_.empty() || (generators_.front() >= 0 && generators_.back() < world)),
      "generation ranks are distinct world ranks, ascending");
  for (int r = 0; r < world; ++r)
    if (!generates(r)) trainers_.push_back(r);
}

bool GenerationLayout::generates(int world_rank) const {
  return std::binary_search(generators_.begin(), generators_.end(), world_rank);
}

int GenerationLayout::generation_index(int world_rank) const {
  const auto it = std::lower_bound(generators_.begin(), generators_.end(), world_rank);
  return it != generators_.end() && *it == world_rank ? static_cast<int>(it - generators_.begin())
                                                      : -1;
}

int GenerationLayout::training_index(int world_rank) const {
  const auto it = std::lower_bound(trainers_.begin(), trainers_.end(), world_rank);
  return it != trainers_.end() && *it == world_rank ? static_cast<int>(it - trainers_.begin()) : -1;
}

std::vector<int> GenerationLayout::served_by(int g) const {
  std::vector<int> out;
  for (int t = 0; t < training_ranks(); ++t)
    if (server_of(t) == g) out.push_back(t);
  return out;
}

std::vector<int> GenerationLayout::sync_group() const {
  std::vector<int> out = generators_;
  out.push_back(trainers_.at(0));
  return out;
}

void send_command(dist::Communicator& sync, const GenerationLayout& layout, LinkMessage m) {
  auto t = torch::tensor({static_cast<int64_t>(m.command), m.value}, torch::kLong);
  sync.broadcast(t, layout.sync_root(), "command to the generation ranks");
}

LinkMessage receive_command(dist::Communicator& sync, const GenerationLayout& layout) {
  auto t = torch::zeros({2}, torch::kLong);
  sync.broadcast(t, layout.sync_root(), "command from training rank 0");
  return {static_cast<LinkCommand>(t[0].item<int64_t>()), t[1].item<int64_t>()};
}

namespace {

// Two tags a rollout step (header, body), the same on both ends.
uint32_t share_tag(int64_t step, int part) {
  return static_cast<uint32_t>(step * 2 + part);
}

// Sends or receives `t` (int64, on the CPU) through the communicator's device.
void exchange(dist::Communicator& world, torch::Tensor& t, int peer, uint32_t tag, bool send,
              const std::string& what) {
  auto staged = t.to(world.device()).contiguous();
  auto work =
      send ? world.send_async(staged, peer, tag, what) : world.recv_async(staged, peer, tag, what);
  world.wait(work, what);
  if (!send) t.copy_(staged.cpu());
}

}  // namespace

void send_share(dist::Communicator& world, int to, int64_t step, const RolloutShare& share) {
  int64_t tokens = 0;
  for (const auto& c : share.completions) tokens += static_cast<int64_t>(c.size());
  int64_t seconds_bits = 0;
  std::memcpy(&seconds_bits, &share.generation_seconds, sizeof seconds_bits);
  const bool with_log_probs = !share.log_probs.empty();
  auto header = torch::tensor(
      {share.policy_step, seconds_bits, static_cast<int64_t>(share.completions.size()), tokens,
       static_cast<int64_t>(with_log_probs)},
      torch::kLong);
  exchange(world, header, to, share_tag(step, 0), true, "sending rollouts to a training rank");
  std::vector<int64_t> body;
  body.reserve(share.completions.size() + static_cast<size_t>(tokens) * (with_log_probs ? 2 : 1));
  for (const auto& c : share.completions) body.push_back(static_cast<int64_t>(c.size()));
  for (const auto& c : share.completions) body.insert(body.end(), c.begin(), c.end());
  if (with_log_probs)
    for (const auto& row : share.log_probs)
      for (double lp : row) {
        int64_t bits = 0;
        std::memcpy(&bits, &lp, sizeof bits);
        body.push_back(bits);
      }
  auto t = torch::tensor(body, torch::kLong);
  exchange(world, t, to, share_tag(step, 1), true, "sending rollouts to a training rank");
}

RolloutShare receive_share(dist::Communicator& world, int from, int64_t step) {
  auto header = torch::zeros({5}, torch::kLong);
  exchange(world, header, from, share_tag(step, 0), false, "receiving rollouts");
  const auto* h = header.data_ptr<int64_t>();
  RolloutShare share;
  share.policy_step = h[0];
  std::memcpy(&share.generation_seconds, &h[1], sizeof share.generation_seconds);
  const int64_t rows = h[2], tokens = h[3];
  const bool with_log_probs = h[4] != 0;
  auto body = torch::zeros({rows + tokens * (with_log_probs ? 2 : 1)}, torch::kLong);
  exchange(world, body, from, share_tag(step, 1), false, "receiving rollouts");
  const auto* b = body.data_ptr<int64_t>();
  int64_t at = rows;
  for (int64_t r = 0; r < rows; ++r) {
    share.completions.emplace_back(b + at, b + at + b[r]);
    at += b[r];
  }
  if (!with_log_probs) return share;
  for (int64_t r = 0; r < rows; ++r) {
    auto& row = share.log_probs.emplace_back(static_cast<size_t>(b[r]));
    std::memcpy(row.data(), b + at, row.size() * sizeof(double));
    at += b[r];
  }
  return share;
}

}  // namespace gpulab::train::rl
