// Training throughput through the trainer's loop: hooks time each step (data wait from the end
// of the previous step to the batch in hand, compute from there to the step done, with the
// device synchronized), the profiler records the timed steps, memory peaks come from the OS and
// the CUDA caching allocator (train/memory_stats.h).
#include "bench/train_bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "bench/op_profile.h"
#include "core/error.h"
#include "core/flag_checks.h"
#include "train/dist/comm_volume.h"
#include "train/memory_stats.h"
#include "train/models/decoder_config.h"
#include "train/parallel/tp_group.h"
#include "train/tasks/task_table.h"
#include "train/thread_env.h"
#include "train/trainer.h"

namespace gpulab::bench {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A private run folder: the trainer writes its metrics log and final weights there.
fs::path scratch_dir() {
  return fs::temp_directory_path() / fmt::format("gpulab-bench-train-{}", ::getpid());
}

}  // namespace

Status validate(const TrainBenchOptions& opts, int world_size) {
  for (const Status& s : {flag_in_range("steps", opts.steps, int64_t{1}, int64_t{1000000}),
                          flag_in_range("warmup", opts.warmup, int64_t{0}, int64_t{1000000})})
    if (!s) return s;
  return train::check_task_options(opts.train, world_size);
}

namespace {

// The trainer's options for the bench: the user's model, data and precision, and the bench's
// own run length, outputs and evaluation.
train::TrainOptions bench_train_options(const TrainBenchOptions& opts) {
  train::TrainOptions t = opts.train;
  const int64_t total = opts.warmup + opts.steps;
  // As many epochs as needed (a small synthetic set may hold fewer batches than the run), ended
  // by --max_steps; evaluation only once at the stop, on one batch.
  t.num_epochs = total;
  t.max_steps = total;
  t.limit_train_batches = 0;
  t.limit_eval_batches = 1;
  t.log_every = total + 1;
  t.grad_accum = 1;
  t.no_checkpoints = true;
  t.no_report = true;
  t.no_weights = true;  // a 1B model's export is gigabytes written only to be deleted
  t.resume.clear();
  t.output_dir = scratch_dir().string();
  return t;
}

// What the hooks measured over the timed steps.
struct StepTimes {
  double data_s = 0, compute_s = 0;
  int64_t timed = 0;
  train::dist::CommVolume comm0, comm1;
};

// Runs the trainer, removing its scratch folder whether it ends or throws.
train::TrainResult run_in_scratch(train::Trainer& trainer, const fs::path& scratch) {
  train::TrainResult run;
  try {
    run = trainer.run();
  } catch (...) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return run;
}

// The result's figures from the timed steps, the trainer and the run.
TrainBenchResult result_of(const train::TrainOptions& t, train::Trainer& trainer,
                           train::DistContext& dist, const train::TrainResult& run,
                           const StepTimes& s) {
  TrainBenchResult r;
  r.steps = s.timed;
  r.world_size = dist.world_size;
  r.batch_size = t.batch_size;
  r.data_seconds = s.data_s;
  r.compute_seconds = s.compute_s;
  // Data-parallel replicas: the ranks of a tensor-parallel group train on the same batch.
  r.images_per_second = static_cast<double>(s.timed * t.batch_size * dist.data_world_size) /
                        std::max(1e-9, s.data_s + s.compute_s);
  if (train::is_language_model(t.model))
    r.tokens_per_second = r.images_per_second * static_cast<double>(t.seq_len);
  r.threads = at::get_num_threads();
  r.omp_wait_policy = train::omp_wait_policy();
  r.device = trainer.device().str();
  r.memory_format = trainer.memory_format().name;
  r.memory_format_reason = trainer.memory_format().reason;
  r.peak_host_memory_bytes = train::peak_host_memory_bytes();
  for (const auto& p : trainer.model().parameters()) r.parameters += p.numel();
  if (auto* g = dist.tp_group()) r.tensor_parallel = g->size();
  if (!run.epochs.empty() && run.epochs.back().lm) {
    r.pipeline_idle_fraction = run.epochs.back().lm->pipeline_idle_fraction;
    r.pipeline_bubble_fraction = run.epochs.back().lm->pipeline_bubble_fraction;
  }
  if (dist.world_size > 1)
    r.comm_per_step = (s.comm1 - s.comm0).to_json(static_cast<double>(s.timed));
  if (const auto peak = train::device_memory_peak(trainer.device())) {
    r.peak_device_memory_bytes = peak->allocated_bytes;
    r.peak_device_reserved_bytes = peak->reserved_bytes;
  }
  if (r.tokens_per_second > 0 && trainer.flops_per_token() > 0) {
    const double tflops = r.tokens_per_second / dist.world_size * trainer.flops_per_token() / 1e12;
    r.tflops_per_device = tflops;
    if (trainer.peak().flops > 0) r.mfu = tflops * 1e12 / trainer.peak().flops;
  }
  return r;
}

}  // namespace

TrainBenchResult run_train_bench(const TrainBenchOptions& opts, train::DistContextPtr dist) {
  const train::TrainOptions t = bench_train_options(opts);
  const int64_t total = opts.warmup + opts.steps;
  train::Trainer trainer(t, dist);
  Clock::time_point step_end = Clock::now(), batch_in_hand;
  StepTimes times;
  std::unique_ptr<OpProfile> profiler;
  const bool profile = !opts.profile.empty() && dist->is_main();
  // Counted from the end of the last warm-up step (the timed steps' stop-flag all-reduces come
  // before their batches); with no warm-up, from the first batch.
  train::StepHooks hooks;
  hooks.batch_ready = [&](int64_t step) {
    if (step == opts.warmup) {
      if (opts.warmup == 0) times.comm0 = train::dist::process_comm_counters().snapshot();
      train::reset_device_memory_peak(trainer.device());
      if (profile) profiler = std::make_unique<OpProfile>(opts.profile);
    }
    batch_in_hand = Clock::now();
  };
  hooks.step_done = [&](int64_t step) {
    // Kernels are asynchronous on a GPU: the step is done when the device is.
    if (trainer.device().is_cuda()) torch::cuda::synchronize(trainer.device().index());
    const auto now = Clock::now();
    if (step + 1 == opts.warmup) times.comm0 = train::dist::process_comm_counters().snapshot();
    if (step + 1 == total) times.comm1 = train::dist::process_comm_counters().snapshot();
    if (step >= opts.warmup && step < total) {
      times.data_s += std::chrono::duration<double>(batch_in_hand - step_end).count();
      times.compute_s += std::chrono::duration<double>(now - batch_in_hand).count();
      ++times.timed;
      if (step + 1 == total) profiler.reset();  // writes the trace; eval stays out of it
    }
    step_end = now;
  };
  trainer.set_step_hooks(std::move(hooks));
  const train::TrainResult run = run_in_scratch(trainer, t.output_dir);
  profiler.reset();
  if (times.timed < opts.steps)
    throw Exception(Code::kInvalidArgument,
                    fmt::format("the data set gave only {} timed steps of {} (after {} warm-up)",
                                times.timed, opts.steps, opts.warmup),
                    "lower --steps/--warmup or --batch_size, or use a larger data set");
  TrainBenchResult r = result_of(t, trainer, *dist, run, times);
  if (profile) {
    r.profile_file = opts.profile;
    r.profile_top = summarize_trace(opts.profile);
  }
  return r;
}

Json TrainBenchResult::to_json() const {
  Json j{{"images_per_second", images_per_second},
         {"data_seconds", data_seconds},
         {"compute_seconds", compute_seconds},
         {"steps", steps},
         {"world_size", world_size},
         {"batch_size", batch_size},
         {"threads", threads},
         {"omp_wait_policy", omp_wait_policy},
         {"memory_format", memory_format},
         {"device", device},
         {"peak_host_memory_bytes", peak_host_memory_bytes},
         {"torch", TORCH_VERSION}};
  if (peak_device_memory_bytes) j["peak_device_memory_bytes"] = *peak_device_memory_bytes;
  if (peak_device_reserved_bytes) j["peak_device_reserved_bytes"] = *peak_device_reserved_bytes;
  if (tokens_per_second > 0) j["tokens_per_second"] = tokens_per_second;
  if (tflops_per_device) j["tflops_per_device"] = *tflops_per_device;
  if (mfu) j["mfu"] = *mfu;
  j["parameters"] = parameters;
  if (tensor_parallel > 0) j["tensor_parallel"] = tensor_parallel;
  if (!comm_per_step.is_null()) j["comm_per_step"] = comm_per_step;
  if (pipeline_idle_fraction) j["pipeline_idle_fraction"] = *pipeline_idle_fraction;
  if (pipeline_bubble_fraction) j["pipeline_bubble_fraction"] = *pipeline_bubble_fraction;
  if (!profile_file.empty()) {
    j["profile_file"] = profile_file;
    j["profile_top"] = profile_top;
  }
  return j;
}

std::string TrainBenchResult::summary() const {
  const double total = data_seconds + compute_seconds;
  std::string s = fmt::format(
      "Throughput: {:.1f} images/s ({} steps x {} images x {} processes, {} threads, {})\n"
      "OpenMP wait policy: {}\n"
      "Memory format: {} ({})\n"
      "Time: {:.3f}s ({:.1f}% waiting for data, {:.1f}% compute)\n"
      "Peak host memory: {:.0f} MiB",
      images_per_second, steps, batch_size, world_size, threads, device, omp_wait_policy,
      memory_format, memory_format_reason, total, 100 * data_seconds / std::max(1e-9, total),
      100 * compute_seconds / std::max(1e-9, total),
      static_cast<double>(peak_host_memory_bytes) / (1 << 20));
  if (peak_device_memory_bytes)
    s += fmt::format(", peak GPU memory: {:.0f} MiB allocated, {:.0f} MiB reserved",
                     static_cast<double>(*peak_device_memory_bytes) / (1 << 20),
                     static_cast<double>(peak_device_reserved_bytes.value_or(0)) / (1 << 20));
  s += "\n";
  if (tokens_per_second > 0)
    s += fmt::format("Tokens: {:.1f} tokens/s (sequences counted as images above)\n",
                     tokens_per_second);
  if (!comm_per_step.is_null())
    s += fmt::format("Communication: {:.0f} bytes sent per step by rank 0\n",
                     comm_per_step["sent_bytes"].get<double>());
  if (pipeline_idle_fraction)
    s += fmt::format("Pipeline: rank 0 idle {:.1f}% of its steps (bubble {:.1f}%)\n",
                     100 * *pipeline_idle_fraction, 100 * pipeline_bubble_fraction.value_or(0));
  if (tflops_per_device)
    s += fmt::format("Model FLOPs: {:.1f} TFLOPS per device{}\n", *tflops_per_device,
                     mfu ? fmt::format(", MFU {:.1f}%", 100 * *mfu) : "");
  if (!profile_file.empty()) s += trace_table(profile_file, profile_top);
  return s;
}

}  // namespace gpulab::bench
