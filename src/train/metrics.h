// Per-epoch metrics: the record the loop fills, its printed line, and the JSONL log in the run
// folder (one JSON object per line, rewritten from history on resume so it never duplicates).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "core/json.h"

namespace gpulab::train {

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  int64_t num_epochs = 0;
  int64_t step = 0;  // optimizer steps completed at the end of the epoch
  double time_s = 0;
  double data_time_s = 0;  // waiting for batches
  double train_loss = 0;
  double train_acc = 0;
  int64_t train_images = 0;
  double images_per_s = 0;
  double lr = 0;  // at the end of the epoch
  std::optional<double> test_loss, test_top1, test_top5;
  int64_t test_images = 0;
  int64_t skipped_steps = 0;  // fp16 overflow steps
  // Language models: train_images counts tokens; accuracy is next-token accuracy.
  struct Lm {
    double tokens_per_s = 0, tokens_per_s_per_device = 0;
    double tflops_per_device = 0, mfu = 0;  // mfu 0 when no peak is known
    double peak_host_memory_bytes = 0;      // the process's resident peak
    // The CUDA caching allocator's peaks (tensors, and held from the driver); GPU runs only.
    std::optional<double> peak_device_allocated_bytes, peak_device_reserved_bytes;
    std::optional<double> val_bits_per_byte;  // when the data knows its bytes per token
    // --pp: the share of rank 0's step time its stage waited (every wait, measured).
    std::optional<double> pipeline_idle_fraction;
    // --pp: rank 0's timed waits in its schedule's fill and drain over those and its compute,
    // the median flush of the epoch (PipelineStepResult::bubble_fraction): the bubble.
    std::optional<double> pipeline_bubble_fraction;
  };
  std::optional<Lm> lm;
  // A task's own figures of the epoch (GRPO: rewards, KL, ...), kept in the log under their
  // names, and their summary for the console line (empty: the loss and accuracy line).
  Json task_figures = Json::object();
  std::string task_summary;
  // Distributed runs: what rank 0's communicators moved per optimizer step of the epoch
  // (dist::CommVolume::to_json: sent bytes in all and by kind); null for one process.
  Json comm_per_step;

  Json to_json() const;
  static EpochRecord from_json(const Json& j);
  // "Epoch 3/10: time=41.24s || loss=2.8204 || acc=0.5177 || 1234.5 img/s || lr=0.0500"
  std::string line() const;
  // "Test accuracy: top1=0.9012 top5=0.9987 (loss 0.2731, 10000 images)"
  std::string test_line() const;
};

class MetricsLog {
 public:
  // Opens <dir>/metrics.jsonl, replacing it with `history` (records already done).
  MetricsLog(const std::filesystem::path& dir, const Json& history, const Json& run_info);
  void append(const Json& record);

 private:
  std::ofstream out_;
};

}  // namespace gpulab::train
