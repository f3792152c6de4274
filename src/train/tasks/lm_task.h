// Language modelling as a training task: token windows (train/lm_batches.h) indexed by the run's
// micro-batch, a decoder of its family sized for the data's vocabulary, next-token cross-entropy,
// validation loss, accuracy and bits per byte, tokens/s turned into TFLOPS and MFU, and a
// Hugging Face folder as the run's weights.
#pragma once

#include <memory>
#include <utility>

#include "train/lm_batches.h"
#include "train/models/causal_lm.h"
#include "train/tasks/train_task.h"

namespace gpulab::train {

namespace parallel {
class TpCausalLm;
class PipelineStage;
class PipelineExecutor;
class DeviceMesh;
class TpGroup;
}  // namespace parallel

// What every language-model task sets on its decoder from the run's options: activation
// checkpointing and the attention path (--attention: sdpa, or gpulab's fused CPU kernel).
void apply_decoder_options(CausalLm& model, const TrainOptions& o);

class LmTask : public TrainTask {
 public:
  explicit LmTask(const TaskEnv& env);
  ~LmTask() override;

  int64_t open_data() override;
  ClassifierPtr build_model() override;
  StateDict init_weight_names(StateDict weights) const override;
  MemoryFormatChoice memory_format(Classifier& model) override;
  void start_epoch(int64_t epoch, int64_t skip) override;  // batches go by index
  std::optional<TaskBatch> next_batch(int64_t index) override;
  StepLoss loss(const torch::Tensor& outputs, const TaskBatch& batch) const override;
  std::optional<StepLoss> forward_backward(const TaskBatch& batch,
                                           const AccumPlace& place) override;
  void add_epoch_figures(EpochRecord& rec) const override;
  void evaluate(Classifier& model, EpochRecord& rec) override;
  std::vector<std::string> header(const RunFacts& facts) const override;
  std::string unit() const override { return "tok"; }
  std::string long_run_hint() const override {
    return "--max_steps, a smaller --seq_len or a GPU shortens it";
  }
  std::vector<std::string> write_weights(Classifier& model, TensorStream& state,
                                         const std::filesystem::path& dir) const override;
  std::string data_name() const override { return data_->name(); }
  std::string input_fact() const override;
  double flops_per_token() const override { return flops_per_token_; }
  PeakFlops peak() const override { return peak_; }

 private:
  TaskBatch to_device(LmBatch batch) const;
  // --pp: this rank's stage of `cfg` (the mesh's pp coordinate) and its executor.
  CausalLmPtr build_stage(const DecoderConfig& cfg, parallel::DeviceMesh& mesh);
  std::string pipeline_line() const;

  TaskEnv env_;
  std::unique_ptr<LmBatches> data_;
  CausalLmPtr model_;
  parallel::TpCausalLm* tp_ = nullptr;    // model_, when it is split over a tensor-parallel group
  std::pair<int64_t, int64_t> tp_bytes_;  // parameter bytes: this TP rank's, the whole model's
  // --pp: model_ is the stage's model; the executor runs the schedule over the pp group.
  std::unique_ptr<parallel::PipelineStage> stage_;
  std::unique_ptr<parallel::PipelineExecutor> pipe_;
  std::vector<double> stage_bytes_;           // every stage's parameter bytes
  double rank_bytes_max_ = 0;                 // TP x PP: the most any rank holds
  double pipe_wait_s_ = 0, pipe_wall_s_ = 0;  // this epoch's steps, on this stage
  // Its first step apart: that step's waits are the ranks' lazy set-up (allocations, the first
  // connections), not the schedule's; left out of the idle fraction when the epoch has more.
  double pipe_first_wait_s_ = 0, pipe_first_wall_s_ = 0;
  std::vector<double> pipe_bubbles_;  // this epoch's flushes' bubble fractions
  double flops_per_token_ = 0;
  PeakFlops peak_;
};

}  // namespace gpulab::train
