// The input pipeline: a DataLoader that turns a Dataset and a Sampler into batches of float
// N×C×S×S images and int64 labels on the target device. CPU worker threads build whole batches
// ahead of the consumer (a few per worker); on CUDA, batches go through pinned memory with
// non-blocking copies. Small in-memory sets on a GPU may instead run the on-device pipeline
// (gpu_pipeline.h). The loader counts the time the consumer waited for data.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "train/data/dataset.h"
#include "train/data/sampler.h"
#include "train/data/transforms.h"

namespace gpulab::train {

enum class PipelineMode {
  kAuto,     // on-device when the target is CUDA and the set is small and in memory
  kWorkers,  // CPU worker threads
  kDevice,   // on-device tensor ops (also works with a CPU target: used by tests)
};

struct LoaderOptions {
  int64_t batch_size = 256;
  int num_workers = -1;         // < 0: chosen from the cores (auto_num_workers)
  int prefetch_per_worker = 2;  // batches each worker may have ready ahead of the consumer
  bool drop_last = false;
  torch::Device device = torch::kCPU;
  bool pin_memory = true;  // only used when device is CUDA
  uint64_t seed = 0;       // augmentation seed (per sample: seed, epoch, index)
  PipelineMode mode = PipelineMode::kAuto;
  TransformOptions transform;
};

struct Batch {
  torch::Tensor images;  // float N×C×S×S on the target device
  torch::Tensor labels;  // int64 N on the target device
  int64_t index = 0;     // batch number within the epoch
};

// Worker count from the cores: all cores (at most 16) split between the local ranks.
int auto_num_workers(int local_ranks = 1);

class DataLoader {
 public:
  DataLoader(DatasetPtr dataset, std::shared_ptr<Sampler> sampler, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins an epoch (asks the sampler for its indices and starts the workers). Calling it
  // again, or before the previous epoch was drained, abandons what was left.
  void start_epoch(int64_t epoch);
  // Ends the current epoch early: the workers stop and are joined, what they built is dropped,
  // and next() returns nullopt until the next start_epoch (a run stopped by Ctrl-C).
  void abandon_epoch();
  // The next batch of the epoch, blocking until it is ready; nullopt after the last one.
  // Rethrows (as gpulab::Exception) an error a worker met, e.g. an undecodable image.
  std::optional<Batch> next();

  int64_t batches_per_epoch() const;  // of the current epoch (0 before start_epoch)
  int64_t samples_per_epoch() const;
  int num_workers() const { return workers_; }
  bool on_device() const { return on_device_; }  // true when the GPU pipeline is in use
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

  // Seconds next() spent waiting for data since construction or reset_stats(), and batches
  // delivered in that time: the trainer reports data time against compute time.
  double data_wait_seconds() const { return wait_seconds_; }
  int64_t batches_delivered() const { return delivered_; }
  void reset_stats() {
    wait_seconds_ = 0;
    delivered_ = 0;
  }

 private:
  class Impl;
  DatasetPtr dataset_;
  std::shared_ptr<Sampler> sampler_;
  LoaderOptions options_;
  int workers_ = 0;
  bool on_device_ = false;
  double wait_seconds_ = 0;
  int64_t delivered_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpulab::train
