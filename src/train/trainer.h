// The training loop of `gpulab train`: builds data, model, optimizer and schedule from
// TrainOptions, resumes from a checkpoint, trains and evaluates epoch by epoch, and writes
// checkpoints, metrics, a report and the final weights. What differs between image
// classification and language modelling is the task's (train/tasks/train_task.h); the loop
// names no task. Rank-aware through DistContext: every rank runs the same loop; only rank 0
// prints and writes files.
#pragma once

#include <array>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "train/dist_hooks.h"
#include "train/memory_format.h"
#include "train/metrics.h"
#include "train/models/classifier.h"
#include "train/optim/loss_scaler.h"
#include "train/optim/schedule.h"
#include "train/peak_flops.h"
#include "train/phase_times.h"
#include "train/precision.h"
#include "train/progress.h"
#include "train/step_losses.h"
#include "train/tasks/train_task.h"
#include "train/train_options.h"

namespace gpulab::train {

// Callbacks around each micro-batch of the training loop, for `gpulab bench train`: it times
// data waits against compute (and starts its profiler) without a second training loop.
struct StepHooks {
  std::function<void(int64_t step)> batch_ready;  // after the loader handed over the batch
  std::function<void(int64_t step)> step_done;    // after backward (and the optimizer step)
};

struct TrainResult {
  std::vector<EpochRecord> epochs;  // all epochs so far, resumed ones included
  double train_seconds = 0;         // this invocation
  int64_t epochs_run = 0;           // this invocation
  int stop_signal = 0;              // SIGINT / SIGTERM that stopped the run early, or 0
  std::filesystem::path output_dir, weights_file, report_file;
};

class Trainer {
 public:
  // opts must have passed check_train_options for dist's world size (the command checks them
  // once, before starting ranks).
  explicit Trainer(TrainOptions opts, DistContextPtr dist = single_process_context());
  ~Trainer();
  TrainResult run();

  // Access for tests and for the DDP layer.
  Classifier& model() { return *model_; }
  const torch::Device& device() const { return device_; }
  const MemoryFormatChoice& memory_format() const { return memory_format_; }
  // A language model's training FLOPs per token (0 for image models) and the device's peak.
  double flops_per_token() const { return task_ ? task_->flops_per_token() : 0; }
  PeakFlops peak() const { return task_ ? task_->peak() : PeakFlops{}; }
  void set_step_hooks(StepHooks hooks) { hooks_ = std::move(hooks); }

 private:
  void setup_runtime();
  void setup_data();
  void setup_model();
  void setup_optimizer();
  void maybe_resume();
  Result<TrainState> load_resume(const CheckpointInfo& ckpt);
  void print_header() const;
  EpochRecord train_one_epoch(int64_t epoch);
  StepLoss micro_step(const TaskBatch& batch, int64_t b);
  struct WarmStep {
    double seconds = 0;
    int64_t items = 0;  // this process's items in the run's first step, when in this epoch
  };
  void after_micro_step(int64_t epoch, int64_t b, int64_t items, WarmStep& warm,
                        std::chrono::steady_clock::time_point t0);
  EpochRecord epoch_record(int64_t epoch, const std::array<double, 3>& local, double time_s,
                           const WarmStep& warm);
  void optimizer_step();
  void evaluate(EpochRecord& rec);
  void load_init_weights();  // --init_weights, before the model moves to its device
  void save_checkpoint_of(int64_t epochs_done, int64_t batches_done = 0);
  bool stop_requested();  // a stop signal on any rank: all ranks agree at a step boundary
  void say_stopped(int64_t epoch, int64_t batch) const;
  void maybe_say_long_run(int64_t epoch, int64_t batch, double seconds_per_batch) const;
  void after_optimizer_step(ProgressBar& bar);
  void write_step_losses();
  void open_metrics_log();
  void write_outputs(TrainResult& result);
  void say(const std::string& line) const;  // rank 0 only
  bool max_steps_reached() const { return opts_.max_steps > 0 && step_ >= opts_.max_steps; }

  TrainOptions opts_;
  DistContextPtr dist_;
  std::filesystem::path out_dir_;
  torch::Device device_ = torch::kCPU;
  Precision precision_ = Precision::kFp32;
  torch::ScalarType compute_dtype_ = torch::kFloat;  // kDouble under --precision fp64
  std::string precision_note_;
  MemoryFormatChoice memory_format_;  // chosen in setup_model
  int threads_ = 1;
  int64_t batch_per_process_ = 0;

  std::unique_ptr<TrainTask> task_;  // data, loss, metrics, evaluation: what differs by kind
  int64_t train_batches_ = 0;        // per epoch, after --limit_train_batches
  ClassifierPtr model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> scaler_;

  int64_t start_epoch_ = 0;  // epochs already done (from a checkpoint)
  int64_t step_ = 0;         // optimizer steps done
  std::vector<EpochRecord> history_;
  std::string resumed_from_;
  StepHooks hooks_;
  int64_t micro_steps_ = 0;     // micro-batches trained by this invocation (for hooks_)
  int64_t resume_batches_ = 0;  // micro-batches of start_epoch_ a stopped run had trained
  int stop_signal_ = 0;         // set when the ranks agreed to stop
  int64_t stopped_at_batch_ = -1;
  PhaseTimes phases_;                // time outside the steady steps, printed at the end
  std::unique_ptr<MetricsLog> log_;  // rank 0
  std::vector<Json> step_records_;   // the task's per-step figures, resumed ones included
  // The per-step loss, kept only for a task without step figures of its own (GRPO has them).
  std::optional<StepLosses> step_losses_;
  std::chrono::steady_clock::time_point estimate_t0_;  // after the first step: run-time estimate
};

}  // namespace gpulab::train
