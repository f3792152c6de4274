// `gpulab bench train`: steady-state training throughput of a model on a data set, measured
// through the trainer's own loop (train::Trainer with step hooks), split into data wait and
// compute time, with peak host and device memory and an optional Chrome trace of the steps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bench/trace_summary.h"
#include "core/json.h"
#include "core/result.h"
#include "train/dist_hooks.h"
#include "train/train_options.h"

namespace gpulab::bench {

struct TrainBenchOptions {
  // Model, data, batch, precision, layout, device, threads: the trainer's own options. The
  // bench overrides epochs, checkpoints, reports and outputs (see run_train_bench).
  train::TrainOptions train;
  int64_t steps = 20;   // timed steps
  int64_t warmup = 5;   // untimed steps first (allocator, oneDNN/cuDNN plans, caches)
  std::string profile;  // Chrome trace of the timed steps (bench/op_profile.h); empty: off
};

// --steps at least 1, --warmup at least 0, and the training options for world_size processes
// (train::check_train_options): kInvalidArgument naming the flag. A command checks it once per
// process, before starting ranks; run_train_bench takes options that passed it.
Status validate(const TrainBenchOptions& opts, int world_size = 1);

struct TrainBenchResult {
  double images_per_second = 0;  // all ranks together (sequences for a language model)
  double tokens_per_second = 0;  // a language model's: sequences/s x --seq_len; else 0
  double data_seconds = 0;       // rank 0: waits for the loader in the timed steps
  double compute_seconds = 0;    // rank 0: forward, backward, optimizer (device synced)
  int64_t steps = 0;             // timed steps
  int world_size = 1;
  int64_t batch_size = 0;  // per process
  int threads = 0;
  std::string omp_wait_policy;  // how idle intra-op threads wait (train/thread_env.h)
  std::string memory_format;    // the layout the trainer chose, and why (train/memory_format.h)
  std::string memory_format_reason;
  std::string device;
  int64_t peak_host_memory_bytes = 0;                 // rank 0's maximum resident set
  std::optional<int64_t> peak_device_memory_bytes;    // CUDA builds: allocator peak (tensors)
  std::optional<int64_t> peak_device_reserved_bytes;  // and what it held from the driver
  std::optional<double> tflops_per_device, mfu;       // language models, when FLOPs are known
  int64_t parameters = 0;                             // rank 0's model (its shard under --tp)
  int tensor_parallel = 0;  // the TP group's size when the run had a device mesh (--tp), else 0
  // --pp: rank 0's share of step time spent waiting (the epoch's first step left out) and its
  // median flush's bubble (train::EpochRecord::Lm), for the formula (P-1)/(V*M+P-1).
  std::optional<double> pipeline_idle_fraction, pipeline_bubble_fraction;
  // Distributed runs: what rank 0's communicators sent per timed step (dist::CommVolume's
  // JSON: bytes in all and by kind); null for one process.
  Json comm_per_step;
  std::string profile_file;  // written when asked
  Json profile_top;          // heaviest ops of the trace (self time)

  Json to_json() const;
  std::string summary() const;  // the human-readable lines
};

// Runs warmup + steps training steps of opts.train through train::Trainer on `dist` (one
// process, or a DDP rank) and returns the measurements (aggregate images/s on every rank).
TrainBenchResult run_train_bench(const TrainBenchOptions& opts,
                                 train::DistContextPtr dist = train::single_process_context());

}  // namespace gpulab::bench
