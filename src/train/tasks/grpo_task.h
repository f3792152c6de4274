// GRPO fine-tuning as a training task (issue 42, colocated mode): each optimizer step samples a
// group of completions per prompt with the policy itself (train/tasks/grpo_rollouts.h), scores
// them with the run's reward (train/rl/), turns the scores into group-relative advantages, and
// trains the policy on its completion tokens with the GRPO / DAPO / Dr. GRPO loss. The loop
// (train/trainer.h) owns the optimizer, precision, checkpoints, resume and signals as for any run.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "train/models/causal_lm.h"
#include "train/rl/reward.h"
#include "train/tasks/grpo_rollouts.h"
#include "train/tasks/grpo_setup.h"
#include "train/tasks/train_task.h"

namespace gpulab::train {

class GrpoTask : public TrainTask {
 public:
  explicit GrpoTask(const TaskEnv& env) : env_(env) {}

  int64_t open_data() override;
  ClassifierPtr build_model() override;
  StateDict init_weight_names(StateDict weights) const override;
  MemoryFormatChoice memory_format(Classifier& model) override;
  void start_epoch(int64_t epoch, int64_t skip) override;
  std::optional<TaskBatch> next_batch(int64_t index) override;
  StepLoss loss(const torch::Tensor& outputs, const TaskBatch& batch) const override;
  std::optional<StepFigures> after_optimizer_step(int64_t step) override;
  std::vector<std::pair<std::string, std::string>> step_charts() const override;
  void add_epoch_figures(EpochRecord& rec) const override;
  void evaluate(Classifier& model, EpochRecord& rec) override {}  // rewards are per step
  std::vector<std::string> header(const RunFacts& facts) const override;
  std::string unit() const override { return "tok"; }
  std::string long_run_hint() const override {
    return "--max_steps, fewer --max_new_tokens, a smaller --group_size or a GPU shortens it";
  }
  std::vector<std::string> write_weights(Classifier& model, TensorStream& state,
                                         const std::filesystem::path& dir) const override;
  std::string data_name() const override { return in_.prompts.source; }
  std::string input_fact() const override;

  // The figures of one step on this rank, summed over ranks in after_optimizer_step.
  struct Sums {
    double reward = 0, reward_sq = 0, rows = 0, completion_tokens = 0;
    double gen_tokens = 0, gen_seconds = 0, step_seconds = 0, sequence_tokens = 0;
    double kl = 0, clip_low = 0, clip_high = 0, loss = 0, micro = 0;
    double groups = 0, dropped_groups = 0, failed_rewards = 0;
    double wait_seconds = 0;  // this training rank's time getting the rollouts (colocated: making)
    double importance_mean = 0, importance_capped = 0;  // summed over micro-batches, as kl
  };

 private:
  struct Rollout {
    int64_t step = -1;
    int64_t policy_step = -1;  // optimizer steps of the weights that sampled it (generation ranks)
    TaskBatch batch;
    Sums sums;  // the rollout's own figures (rewards, lengths, generation)
  };
  std::vector<int64_t> prompts_of_step(int64_t step) const;
  Rollout make_rollout(int64_t step, int64_t index);
  StepRollouts completions_of(int64_t step, int64_t index,
                              const std::vector<std::vector<int64_t>>& prompts, Rollout& r);
  StepRollouts received_completions(RolloutSource& source, int64_t step, int64_t index, Rollout& r);
  void sync_policy(RolloutSource& source, int64_t policy_step);
  int64_t run_end_index() const;
  rl::ResolvedRewards score(const std::vector<std::vector<int64_t>>& completions,
                            const std::vector<const rl::Prompt*>& sources, Sums& sums) const;
  torch::Tensor log_probs_of(CausalLm& model, const TaskBatch& batch) const;
  void build_reference();

  TaskEnv env_;
  GrpoInputs in_;
  CausalLmPtr model_;
  CausalLmPtr ref_;  // the frozen reference when --beta > 0
  int64_t steps_per_epoch_ = 0;
  int64_t prompts_per_rank_ = 0;
  std::optional<Rollout> rollout_;
  mutable Sums step_;           // this step's loss figures on this rank (loss() is const)
  bool fresh_rollout_ = false;  // this step made a rollout (its figures are in step_)
  std::chrono::steady_clock::time_point step_t0_;
  std::vector<Json> epoch_steps_;  // this epoch's step records
  int64_t synced_step_ = -1;       // the policy step the generation ranks hold (-1: none sent)
  Json weight_hashes_;             // test hook: the last sync's fingerprints, for the step record
};

// A rollout's figures added to a step's (its generation's too when with_generation).
void add_rollout_sums(GrpoTask::Sums& s, const GrpoTask::Sums& rollout, bool with_generation);

}  // namespace gpulab::train
