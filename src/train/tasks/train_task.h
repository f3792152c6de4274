// What a kind of training (image classification, language modelling, later GRPO) tells the one
// training loop: its data and batches, the model it trains, its loss and the items a step
// counts, its evaluation, its epoch figures, its header and outputs. The loop (train/trainer.h)
// owns steps, precision, the optimizer, checkpoints, signals and ranks, and names no task.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/dist_hooks.h"
#include "train/memory_format.h"
#include "train/metrics.h"
#include "train/models/classifier.h"
#include "train/peak_flops.h"
#include "train/precision.h"
#include "train/train_options.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train {

// The run a task serves, set up by the loop before the task exists.
struct TaskEnv {
  const TrainOptions& opts;
  DistContext& dist;
  torch::Device device;
  Precision precision;
  torch::ScalarType compute_dtype;  // kDouble under --precision fp64
  int64_t batch_per_process;
  int threads;
};

// One micro-batch, on the device.
struct TaskBatch {
  torch::Tensor inputs;   // what the model's forward takes
  torch::Tensor targets;  // what the loss compares with, one entry per counted item
  // Whatever else a task's loss needs (GRPO: advantages, old log-probabilities, masks).
  std::map<std::string, torch::Tensor> extra;
};

// How the loop groups an epoch's `micro_batches` into optimizer steps: --grad_accum at a time,
// the epoch's last group possibly shorter (Trainer::micro_step).
inline int64_t optimizer_steps_per_epoch(int64_t micro_batches, int64_t grad_accum) {
  return (micro_batches + grad_accum - 1) / grad_accum;
}
// The optimizer steps taken before micro-batch `index` of the run (epoch x micro_batches +
// batch), so that a task can tell which policy trained up to a micro-batch.
inline int64_t optimizer_steps_before(int64_t index, int64_t micro_batches, int64_t grad_accum) {
  return index / micro_batches * optimizer_steps_per_epoch(micro_batches, grad_accum) +
         index % micro_batches / grad_accum;
}

// Where a micro-batch sits in its optimizer step: the group's size (its gradient is the mean of
// the group's micro-batch means) and whether it is the group's last.
struct AccumPlace {
  int64_t group_size = 1;
  bool last = true;
  double loss_scale = 1.0;  // fp16's loss scale: what backward multiplies the loss by
};

// A micro-batch's loss and what the epoch's figures sum from it.
struct StepLoss {
  torch::Tensor loss;     // the mean over `count` items: what backward runs on
  torch::Tensor correct;  // items predicted right (a device scalar); undefined: no such notion
  int64_t count = 0;      // items trained on (images, tokens)
};

// A task's figures of one optimizer step (GRPO's reward, KL, generation share), the same on
// every rank: its console line (empty: none) and its metrics.jsonl record ("type": "step").
struct StepFigures {
  std::string line;
  Json record;
};

// What the loop knows that a task's header shows.
struct RunFacts {
  int64_t steps_per_epoch = 0;
  int64_t warmup_steps = 0;
};

class TrainTask {
 public:
  virtual ~TrainTask() = default;

  // Step 2: opens the data; returns this process's training batches per epoch (before
  // --limit_train_batches). Throws gpulab::Exception for data that cannot train.
  virtual int64_t open_data() = 0;
  // Step 3: the model, initialised (on its device when it is built there).
  virtual ClassifierPtr build_model() = 0;
  // --init_weights' tensors under the model's names (a Hugging Face layout, say).
  virtual StateDict init_weight_names(StateDict weights) const { return weights; }
  // After the model is on its device and before ranks share it: its layout.
  virtual MemoryFormatChoice memory_format(Classifier& model) = 0;

  // An epoch's batches: start_epoch, then next_batch once per batch from `skip` on (the batches
  // a stopped run trained; nullopt: the data ended). `index` counts micro-batches over the run
  // (epoch * batches per epoch + batch), so data chosen by index is the same after a resume.
  virtual void start_epoch(int64_t epoch, int64_t skip) = 0;
  virtual std::optional<TaskBatch> next_batch(int64_t index) = 0;
  // The run stops inside this epoch: no more batches are built.
  virtual void abandon_epoch() {}
  // The loss of the model's outputs (the forward ran under the loop's autocast).
  virtual StepLoss loss(const torch::Tensor& outputs, const TaskBatch& batch) const = 0;
  // A model that runs its own forward and backward passes over a micro-batch (a pipeline stage's
  // schedule, which interleaves them across ranks): the batch's loss, its gradients (scaled by
  // 1 / group_size) accumulated into the parameters when this returns. nullopt: the loop runs
  // forward, loss and backward.
  virtual std::optional<StepLoss> forward_backward(const TaskBatch& /*batch*/,
                                                   const AccumPlace& /*place*/) {
    return std::nullopt;
  }

  // After each optimizer step, on every rank in step (a task may sum over ranks here): the
  // step's figures, or nullopt for a task that has none per step.
  virtual std::optional<StepFigures> after_optimizer_step(int64_t /*step*/) { return std::nullopt; }
  // The report's per-step curves: (key of the step records, chart title).
  virtual std::vector<std::pair<std::string, std::string>> step_charts() const { return {}; }

  // The epoch's own figures: seconds waited for data, and any the task adds to the record.
  virtual double data_wait_seconds() const { return 0; }
  virtual void add_epoch_figures(EpochRecord& rec) const {}
  // Held-out figures into rec (test_*), summed over ranks; the model is in eval mode, no grad.
  virtual void evaluate(Classifier& model, EpochRecord& rec) = 0;

  // The header's lines about data, model, optimizer and device.
  virtual std::vector<std::string> header(const RunFacts& facts) const = 0;
  virtual std::string unit() const = 0;  // what a step counts, per second: "img", "tok"
  // What shortens a long CPU run ("--subset N, fewer --num_epochs or a GPU shortens it").
  virtual std::string long_run_hint() const = 0;
  // Writes the final weights into dir (rank 0); returns the lines that name what it wrote.
  // `state`: the model's tensors in the ordinary layout (DistContext::model_stream); every one
  // is taken, even after a failure (model-parallel ranks send them).
  virtual std::vector<std::string> write_weights(Classifier& model, TensorStream& state,
                                                 const std::filesystem::path& dir) const = 0;
  virtual std::string data_name() const = 0;
  virtual std::string input_fact() const = 0;  // the report's "input size"

  // A language model's training FLOPs per token and the peak its MFU divides by (0: none).
  virtual double flops_per_token() const { return 0; }
  virtual PeakFlops peak() const { return {}; }
};

}  // namespace gpulab::train
