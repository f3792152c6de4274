// The training loop of `gpulab train`: builds data, model, optimizer and schedule from
// TrainOptions, resumes from a checkpoint, trains and evaluates epoch by epoch, and writes
// checkpoints, metrics, a report and the final weights. Rank-aware through DistContext: every
// rank runs the same loop; only rank 0 prints and writes files.
#pragma once

#include <array>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "train/data/datasets.h"
#include "train/data/loader.h"
#include "train/dist_hooks.h"
#include "train/lm_batches.h"
#include "train/memory_format.h"
#include "train/metrics.h"
#include "train/models/causal_lm.h"
#include "train/models/classifier.h"
#include "train/optim/loss_scaler.h"
#include "train/optim/schedule.h"
#include "train/peak_flops.h"
#include "train/phase_times.h"
#include "train/precision.h"
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
  explicit Trainer(TrainOptions opts, DistContextPtr dist = single_process_context());
  ~Trainer();
  TrainResult run();

  // Access for tests and for the DDP layer.
  Classifier& model() { return *model_; }
  CausalLmPtr language_model() const { return causal_lm_; }
  const torch::Device& device() const { return device_; }
  const MemoryFormatChoice& memory_format() const { return memory_format_; }
  // A language model's training FLOPs per token (0 for image models) and the device's peak.
  double flops_per_token() const { return flops_per_token_; }
  const PeakFlops& peak() const { return peak_; }
  void set_step_hooks(StepHooks hooks) { hooks_ = std::move(hooks); }

 private:
  void setup_runtime();
  void setup_data();
  void setup_model();
  void setup_optimizer();
  void maybe_resume();
  void print_header() const;
  EpochRecord train_one_epoch(int64_t epoch);
  struct WarmStep {
    double seconds = 0;
    int64_t images = 0;  // this process's images in the run's first step, when in this epoch
  };
  EpochRecord epoch_record(int64_t epoch, const std::array<double, 3>& local, double time_s,
                           const WarmStep& warm);
  void optimizer_step();
  void evaluate(EpochRecord& rec);
  void setup_language_model();
  void load_init_weights();  // --init_weights, before the model moves to its device
  void add_lm_metrics(EpochRecord& rec) const;
  void save_checkpoint_of(int64_t epochs_done, int64_t batches_done = 0);
  bool stop_requested();  // a stop signal on any rank: all ranks agree at a step boundary
  void say_stopped(int64_t epoch, int64_t batch) const;
  void maybe_say_long_run(int64_t epoch, int64_t batch, double seconds_per_batch) const;
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

  DatasetPtr train_set_, test_set_;
  std::unique_ptr<DataLoader> train_loader_, test_loader_;
  int64_t train_batches_ = 0;  // per epoch, after --limit_train_batches
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
  PhaseTimes phases_;  // time outside the steady steps, printed at the end
  std::chrono::steady_clock::time_point estimate_t0_;  // after the first step: run-time estimate

  // Language models (--model llama-* or gpt2-*, --dataset text): token batches instead of the image
  // loader, the decoder itself, and what tokens/s turn into TFLOPS and MFU with.
  bool lm_ = false;
  std::unique_ptr<LmBatches> lm_data_;
  CausalLmPtr causal_lm_;
  double flops_per_token_ = 0;
  PeakFlops peak_;
};

// Every check that needs no data and no peer (option values, the model name and its input size,
// the batch split): the launcher runs it before starting ranks, so a typo gives one error, not
// one per rank. Throws gpulab::Exception (invalid input).
void check_train_options(const TrainOptions& o, int world_size);
// The batch each process takes: --batch_size, or with --batch_size_scaled its share of that
// global batch (check_train_options refuses a global batch smaller than the processes).
int64_t batch_per_process(const TrainOptions& o, int world_size);

}  // namespace gpulab::train
