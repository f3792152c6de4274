// Where a training rank's GRPO rollouts come from when generation runs on ranks of its own
// (`--generation_gpus N`, train/rl/grpo_rollout_link.h): training rank 0 sends the policy's
// weights to the generation ranks before they sample, asks for each rollout step and says when
// the run ends; every training rank receives its share of each step from its generation rank.
// A step may be asked for before its share is wanted (--overlap_generation): the generation ranks
// sample it while the training ranks train on the one before.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "train/dist/communicator.h"
#include "train/rl/grpo_rollout_link.h"

namespace gpulab::train {

class RolloutSource {
 public:
  // `sync` is null except on training rank 0 (training_rank 0), the sync group's root.
  RolloutSource(const rl::GenerationLayout& layout, int training_rank,
                std::shared_ptr<dist::Communicator> world,
                std::shared_ptr<dist::Communicator> sync);

  const rl::GenerationLayout& layout() const { return layout_; }
  // Makes the model's parameters whole on every training rank before they are sent (ZeRO-3
  // keeps only shards between forwards); a collective of the training ranks. Empty: whole already.
  void set_gather(std::function<void()> gather) { gather_ = std::move(gather); }

  // Every training rank calls it, in step (the gather is theirs). Training rank 0: `model`'s
  // weights to the generation ranks, tagged with `policy_step` (its optimizer steps). With the
  // weight-hash test hook on, returns each generation rank's fingerprint of what it received;
  // otherwise (and on the other training ranks) empty.
  std::vector<uint64_t> send_weights(torch::nn::Module& model, int64_t policy_step);
  // Every training rank calls it, in step: training rank 0 asks for rollout step `step`, which the
  // generation ranks sample with the weights sent last. One step at most is asked for and not yet
  // received.
  void request(int64_t step);
  bool requested(int64_t step) const { return pending_ == step; }
  // This training rank's share of rollout step `step` (asked for first unless it was).
  rl::RolloutShare receive(int64_t step);
  // The run ended or stopped: every training rank takes its share of a step asked for and never
  // received (the generation ranks would wait to send it), then training rank 0 tells the
  // generation ranks to leave. Once; later calls do nothing.
  void stop();

 private:
  rl::GenerationLayout layout_;
  int training_rank_;
  std::shared_ptr<dist::Communicator> world_, sync_;
  std::function<void()> gather_;
  int64_t pending_ = -1;  // the step asked for and not yet received (-1: none)
  bool stopped_ = false;
};

}  // namespace gpulab::train
