// GRPO with generation ranks of its own (`--generation_gpus N`, docs/rl.md): which world ranks
// generate and which train, and the messages between them. By default world ranks 0..N-1
// generate (the launcher gives local rank i GPU i, so they take the first N GPUs);
// `--generation_gpu_ids` names other local ranks of the first node (so other GPUs). The other
// ranks train as their own data-parallel group. Training rank 0 drives: over the "sync" group
// (the generation ranks and it) it sends commands and the policy's weights; each generation rank
// samples the shares of the training ranks it serves and sends each its completions.
#pragma once

#include <cstdint>
#include <vector>

#include "train/dist/communicator.h"

namespace gpulab::train::rl {

class GenerationLayout {
 public:
  // `generators`: the world ranks that generate (ascending, distinct, each below `world`).
  GenerationLayout(std::vector<int> generators, int world);

  int generation_ranks() const { return static_cast<int>(generators_.size()); }  // N
  int training_ranks() const { return world_ - generation_ranks(); }
  bool generates(int world_rank) const;
  // Generation rank g's world rank, and the other way (-1: it trains).
  int world_rank_of_generation(int g) const { return generators_.at(static_cast<size_t>(g)); }
  int generation_index(int world_rank) const;
  // Training rank t's world rank (the t-th world rank that does not generate), and the other way
  // (-1: it generates).
  int world_rank_of_training(int t) const { return trainers_.at(static_cast<size_t>(t)); }
  int training_index(int world_rank) const;
  // The generation rank that samples training rank t's share (round robin).
  int server_of(int t) const { return t % generation_ranks(); }
  std::vector<int> served_by(int g) const;                              // training ranks, ascending
  const std::vector<int>& training_group() const { return trainers_; }  // their world ranks
  // The generation ranks' world ranks, then training rank 0's.
  std::vector<int> sync_group() const;
  int sync_root() const { return generation_ranks(); }  // training rank 0's place in sync_group

 private:
  std::vector<int> generators_, trainers_;
  int world_ = 0;
};

enum class LinkCommand : int64_t {
  kWeights = 1,  // the policy's weights follow (rl::broadcast_weights); value: its step
  kRollout = 2,  // sample the shares of the rollout step `value` and send them
  kStop = 3,     // the run ended: leave
};

struct LinkMessage {
  LinkCommand command = LinkCommand::kStop;
  int64_t value = 0;
};

// Training rank 0 sends, every generation rank receives (a broadcast over the sync group).
void send_command(dist::Communicator& sync, const GenerationLayout& layout, LinkMessage m);
LinkMessage receive_command(dist::Communicator& sync, const GenerationLayout& layout);

// One training rank's completions of one rollout step, and where they came from.
struct RolloutShare {
  int64_t policy_step = 0;        // optimizer steps taken by the weights that sampled them
  double generation_seconds = 0;  // the generation rank's time sampling the whole step's shares
  std::vector<std::vector<int64_t>> completions;  // as rollouts_for_step returns them
  std::vector<std::vector<double>> log_probs;     // the tokens' as recorded, or empty
};

// Point to point over the world group: a header (policy step, time, rows, tokens, whether
// log-probabilities follow), then every row's length, its tokens and their log-probabilities
// (the doubles' bits) in one buffer. `step` keys the messages' tags.
void send_share(dist::Communicator& world, int to, int64_t step, const RolloutShare& share);
RolloutShare receive_share(dist::Communicator& world, int from, int64_t step);

}  // namespace gpulab::train::rl
