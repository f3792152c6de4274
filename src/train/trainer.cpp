// The training loop, as named steps: set up, resume, then per epoch train, evaluate, log and
// checkpoint; at the end export weights and the report.
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iostream>

#include "core/duration.h"
#include "core/error.h"
#include "core/files.h"
#include "launch/heartbeat.h"
#include "launch/launcher.h"
#include "launch/rank_env.h"
#include "launch/slurm_script.h"
#include "train/checkpoint.h"
#include "train/device.h"
#include "train/dist/comm_volume.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/host_allocator.h"
#include "train/memory_format.h"
#include "train/ops/batched_attention.h"
#include "train/ops/cpu_kernels.h"
#include "train/optim/optimizers.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/resume_check.h"
#include "train/run_files.h"
#include "train/stop_signal.h"
#include "train/tasks/task_table.h"
#include "train/test_hooks.h"
#include "train/weights/hf_shards.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Module::to(device, dtype) for the tensors the model holds: those on the meta device (another
// pipeline stage's pieces, shapes only) stay there (Module::to cannot copy them), in the dtype.
void move_module(torch::nn::Module& m, torch::Device device, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const auto moved = [&](const torch::Tensor& t) {
    const auto type = t.is_floating_point() ? dtype : t.scalar_type();
    return t.is_meta() ? t.to(type) : t.to(device, type);
  };
  for (auto& t : m.parameters()) t.set_data(moved(t));
  for (auto& t : m.buffers()) t.set_data(moved(t));
}

// Micro-batches the run still trains, `done` batches into epoch `epoch`: the epochs' batches, or
// fewer where --max_steps ends it first (its optimizer steps left, each --grad_accum batches).
int64_t batches_left(const TrainOptions& o, int64_t train_batches, int64_t step, int64_t epoch,
                     int64_t done) {
  int64_t left = (o.num_epochs - epoch) * train_batches - done;
  if (o.max_steps > 0) left = std::min(left, (o.max_steps - step) * o.grad_accum);
  return std::max<int64_t>(left, 0);
}
}  // namespace

Trainer::Trainer(TrainOptions opts, DistContextPtr dist)
    : opts_(std::move(opts)), dist_(std::move(dist)), out_dir_(effective_output_dir(opts_)) {}

Trainer::~Trainer() = default;

void Trainer::say(const std::string& line) const {
  if (!dist_->is_main()) return;
  std::cout << line << std::endl;
}

// Step 1: threads, device, seeds, determinism, precision.
void Trainer::setup_runtime() {
  set_cpu_kernels(opts_.cpu_kernels == "on");
  set_batched_attention(opts_.attention != "sdpa");
  if (!dist_->splits_model()) keep_freed_host_memory();
  threads_ = configure_threads(static_cast<int>(opts_.threads), dist_->local_world_size);
  device_ = resolve_device(opts_.device, dist_->local_rank);
  torch::manual_seed(static_cast<uint64_t>(opts_.seed));
  if (opts_.deterministic) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  } else if (device_.is_cuda()) {
    at::globalContext().setBenchmarkCuDNN(true);
  }
  precision_ = parse_precision(opts_.precision);
  // --precision fp64 trains and evaluates in float64 (model, inputs, loss): the DDP
  // equivalence test uses it so that fp32 rounding, which ReLU kinks amplify within a few
  // steps, does not hide whether two runs compute the same thing.
  if (precision_ == Precision::kFp64) compute_dtype_ = torch::kDouble;
  precision_note_ = configure_precision(precision_, device_);
  scaler_ =
      std::make_unique<LossScaler>(needs_loss_scaler(precision_) || test_hooks::loss_scaling());
}

// Step 2: the task the options name, and its data.
void Trainer::setup_data() {
  batch_per_process_ = batch_per_process(opts_, dist_->data_world_size);
  task_ = make_train_task(
      TaskEnv{opts_, *dist_, device_, precision_, compute_dtype_, batch_per_process_, threads_});
  train_batches_ = task_->open_data();
  if (opts_.limit_train_batches > 0)
    train_batches_ = std::min(train_batches_, opts_.limit_train_batches);
  if (task_->step_charts().empty()) step_losses_.emplace();
}

// Step 3: the model, on its device, in its memory format, identical on every rank.
void Trainer::setup_model() {
  model_ = task_->build_model();
  // Loaded after the move: an fp64 file reaches an fp64 model unrounded (loaded into the fp32
  // build first, it went through fp32 on the way), and a GPU run copies it straight to the device.
  move_module(*model_, device_, compute_dtype_);
  load_init_weights();
  memory_format_ = task_->memory_format(*model_);
  dist_->prepare_model(*model_);
}

// Every rank loads the same file, so the replicas start equal without a broadcast.
void Trainer::load_init_weights() {
  if (opts_.init_weights.empty()) return;
  // A safetensors file, or a run folder or checkpoint (run_files.h): any run's weights.
  auto files = locate_model_files(opts_.init_weights);
  auto tensors = files ? read_model_weights(*files) : Result<StateDict>(files.error());
  if (!tensors)
    throw Exception(tensors.error().code, "--init_weights " + tensors.error().message,
                    !tensors.error().hint.empty()
                        ? tensors.error().hint
                        : "pass a .safetensors file (a run's model.safetensors, or a Hugging Face "
                          "checkpoint of the same shape), a run folder or a checkpoint");
  *tensors = task_->init_weight_names(std::move(*tensors));
  if (auto st = load_state_dict(*model_, *tensors, "--init_weights " + opts_.init_weights); !st)
    throw Exception(st.error());
}

// Step 4: optimizer (decay / no-decay groups), schedule over optimizer steps, loss scaler.
void Trainer::setup_optimizer() {
  // Sharded data parallel steps this rank's shards instead of the model's parameters.
  auto groups = dist_->optimizer_groups();
  optimizer_ = groups.empty() ? make_optimizer(optimizer_spec(opts_), *model_)
                              : make_optimizer(optimizer_spec(opts_), groups[0], groups[1]);
  ScheduleSpec s;
  s.kind = opts_.lr_schedule;
  s.base_lr = opts_.learning_rate;
  s.steps_per_epoch = optimizer_steps_per_epoch(train_batches_, opts_.grad_accum);
  s.total_epochs = opts_.num_epochs;
  s.warmup_epochs = opts_.warmup_epochs;
  s.step_size = opts_.step_size;
  s.gamma = opts_.gamma;
  schedule_ = std::make_unique<LrSchedule>(s);
}

namespace {
// What names a checkpoint to the user: a sharded one's manifest (its files are per rank), an
// ordinary one's file (whichever context read it: tensor parallelism reads the ordinary kind).
fs::path checkpoint_name(const CheckpointInfo& ckpt) {
  return dist::is_sharded_checkpoint(ckpt) || parallel::is_mesh_checkpoint(ckpt) ? ckpt.manifest
                                                                                 : ckpt.file;
}

// A checkpoint into a whole model: an ordinary one, or a tensor- or pipeline-parallel run's
// pieces joined.
Result<TrainState> load_whole(const CheckpointInfo& ckpt, torch::nn::Module& model,
                              torch::optim::Optimizer& opt) {
  if (!parallel::is_mesh_checkpoint(ckpt)) return load_checkpoint(ckpt, model, opt);
  parallel::StageLayout whole;
  return parallel::load_mesh_checkpoint(ckpt, model, opt, whole);
}
}  // namespace

// A checkpoint into this run's model and optimizer: by the distributed context where it reads
// its kind (per-rank checkpoints; a model-parallel context's outcome agreed by every rank), else
// whole.
Result<TrainState> Trainer::load_resume(const CheckpointInfo& ckpt) {
  auto sharded = dist_->load_checkpoint(ckpt, *model_, *optimizer_);
  if (!sharded && dist::is_sharded_checkpoint(ckpt))
    throw Exception(
        Code::kInvalidArgument,
        "checkpoint " + ckpt.manifest.string() + " was written with --shard (one file per rank)",
        "resume it with the --shard it was trained with, or start a new run in "
        "another --output_dir");
  if (sharded) return std::move(*sharded);  // (sharded loading keeps the memory layout)
  auto s = load_whole(ckpt, *model_, *optimizer_);
  // Loading replaces the parameters' storage with the file's layout (a checkpoint written in
  // the other layout); this run's layout is the one chosen above.
  if (s && memory_format_.channels_last) make_channels_last(*model_);
  return s;
}

// Step 5: --resume auto | PATH restores everything a checkpoint holds.
void Trainer::maybe_resume() {
  if (opts_.resume.empty()) return;
  const bool automatic = opts_.resume == "auto";
  const fs::path dir = out_dir_ / "checkpoints";
  std::optional<CheckpointInfo> ckpt;
  if (automatic) {
    ckpt = find_resumable(dir);
    if (!ckpt) {
      say("No complete checkpoint in " + dir.string() + "; starting from scratch");
      return;
    }
  } else {
    ckpt = checkpoint_at(opts_.resume).value_or_throw();
  }
  auto loaded = load_resume(*ckpt);
  // --resume auto: a per-rank checkpoint whose damage shows only as its files are read (every
  // rank agrees on it, and every rank's load overwrites all it holds) gives way to an older one.
  while (automatic && !loaded && loaded.error().code == Code::kDataError &&
         parallel::is_mesh_checkpoint(*ckpt)) {
    auto older = find_resumable(dir, ckpt->manifest);
    if (!older) break;
    if (dist_->is_main())
      std::cerr << "warning: skipping damaged checkpoint " << ckpt->manifest.string() << " ("
                << loaded.error().message << ")\n";
    ckpt = std::move(older);
    loaded = load_resume(*ckpt);
  }
  TrainState s = std::move(loaded).value_or_throw();
  // Nothing is written before this check: a refused resume leaves the run as it was.
  if (auto st =
          check_resume_options(s.options, options_to_json(opts_), checkpoint_name(*ckpt).string());
      !st)
    throw Exception(st.error());
  start_epoch_ = s.epoch;
  step_ = s.step;
  resume_batches_ = s.batches_done;
  scaler_->load(s.scaler);
  for (const auto& r : s.history) history_.push_back(EpochRecord::from_json(r));
  resumed_from_ = checkpoint_name(*ckpt).string();
}

void Trainer::print_header() const {
  if (!dist_->is_main()) return;
  for (const auto& line :
       task_->header({schedule_->spec().steps_per_epoch, schedule_->warmup_steps()}))
    say(line);
  if (!precision_note_.empty()) say(precision_note_);
  if (!resumed_from_.empty())
    say(fmt::format("Resumed from {} (epoch {}, step {}{})", resumed_from_, start_epoch_, step_,
                    resume_batches_ > 0
                        ? fmt::format(", batch {} of epoch {}", resume_batches_, start_epoch_ + 1)
                        : ""));
  say("");
}

// One optimizer step after the last micro-batch of an accumulation group.
void Trainer::optimizer_step() {
  dist_->after_backward(*model_);
  test_hooks::nudge_gradient(dist_->rank, step_ + 1, *optimizer_);
  bool finite = scaler_->unscale(*optimizer_);
  // fp16: every rank skips an overflowing step, whichever rank's gradients (a shard) held it.
  if (scaler_->enabled()) finite = !dist_->overflow_anywhere(!finite);
  if (finite && opts_.clip_grad > 0) dist_->clip_grad_norm(*model_, opts_.clip_grad);
  if (finite) optimizer_->step();
  scaler_->update(!finite);
  dist_->after_step(*model_, *optimizer_);
  for (auto& p : model_->parameters()) p.mutable_grad().reset();  // set_to_none
  ++step_;
}

// Named steps of one micro-batch: lr, forward, loss, backward, (optimizer step).
StepLoss Trainer::micro_step(const TaskBatch& batch, int64_t b) {
  const int64_t accum = opts_.grad_accum;
  const int64_t group_start = b / accum * accum;
  const int64_t group_size = std::min(accum, train_batches_ - group_start);
  const bool last_micro = b == group_start + group_size - 1;
  if (b == group_start) set_learning_rate(*optimizer_, schedule_->lr_at(step_));
  dist_->before_backward(*model_, last_micro);
  // A pipeline stage's schedule: one flush per micro-batch, --grad_accum flushes per step.
  const double scale = scaler_->enabled() ? scaler_->scale() : 1.0;
  if (auto s = task_->forward_backward(batch, {group_size, last_micro, scale})) {
    if (last_micro) optimizer_step();
    return *s;
  }
  torch::Tensor outputs;
  {
    AutocastGuard autocast(precision_, device_);
    outputs = model_->forward(batch.inputs);
  }
  StepLoss s = task_->loss(outputs, batch);
  scaler_->scale_loss(s.loss / static_cast<double>(group_size)).backward();
  if (last_micro) optimizer_step();
  return s;
}

// The run's first step warms up (kernel choice, allocator, lazy initialisation): timed on its
// own and left out of the epoch's throughput; the next five (across epochs when they are short)
// give the estimate of a long run.
void Trainer::after_micro_step(int64_t epoch, int64_t b, int64_t items, WarmStep& warm,
                               Clock::time_point t0) {
  if (hooks_.step_done) hooks_.step_done(micro_steps_);
  if (micro_steps_ == 0) {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());  // done when its queue is
    warm.seconds = seconds_since(t0);
    warm.items = items;
    phases_.add("first step", warm.seconds);
  }
  ++micro_steps_;
  if (micro_steps_ == 1) estimate_t0_ = Clock::now();
  if (micro_steps_ == 6) maybe_say_long_run(epoch, b + 1, seconds_since(estimate_t0_) / 5.0);
}

EpochRecord Trainer::train_one_epoch(int64_t epoch) {
  model_->train();
  // A run stopped inside this epoch resumes after the batches it trained (same data order).
  const int64_t first = epoch == start_epoch_ ? std::min(resume_batches_, train_batches_) : 0;
  task_->start_epoch(epoch, first);
  // The bar ends where the epoch does, or where --max_steps stops the run inside it; its run ETA
  // counts the batches after it up to the run's end (--max_steps included).
  const int64_t run_left = batches_left(opts_, train_batches_, step_, epoch, first);
  const int64_t last = std::min(train_batches_, first + run_left);
  ProgressBar bar(dist_->is_main(), last, fmt::format("Epoch {}/{}", epoch + 1, opts_.num_epochs));
  bar.set_later_batches(run_left - (last - first));
  bar.start_at(first);
  const auto on_device = torch::TensorOptions().device(device_);
  torch::Tensor loss_sum = torch::zeros({}, on_device);
  torch::Tensor correct = torch::zeros({}, on_device.dtype(torch::kLong));
  int64_t items = 0;
  WarmStep warm;
  const auto t0 = Clock::now();
  const dist::CommVolume comm0 = dist::process_comm_counters().snapshot();
  const int64_t step0 = step_;
  for (int64_t b = first; b < train_batches_; ++b) {
    if (max_steps_reached()) break;
    if (b % opts_.grad_accum == 0 && stop_requested()) {
      stopped_at_batch_ = b;
      task_->abandon_epoch();  // no batch of this epoch is built while the run ends
      break;
    }
    auto batch = task_->next_batch(epoch * train_batches_ + b);
    if (!batch) break;
    if (hooks_.batch_ready) hooks_.batch_ready(micro_steps_);
    launch::heartbeat(fmt::format("epoch {} batch {} of {}", epoch + 1, b + 1, train_batches_));
    const int64_t steps_before = step_;
    const StepLoss s = micro_step(*batch, b);
    if (step_losses_) step_losses_->add(s);
    if (step_ != steps_before) after_optimizer_step(bar);
    items += s.count;
    loss_sum += s.loss.detach() * static_cast<double>(s.count);
    if (s.correct.defined()) correct += s.correct;
    if (bar.due(b + 1))
      bar.update(b + 1, fmt::format("loss {:.4f}, {:.0f} {}/s", s.loss.item<double>(),
                                    static_cast<double>(items) / seconds_since(t0), task_->unit()));
    after_micro_step(epoch, b, s.count, warm, t0);
  }
  bar.clear();
  // The steps' own traffic: taken before the epoch's metric all-reduce below.
  const dist::CommVolume comm = dist::process_comm_counters().snapshot() - comm0;
  write_step_losses();
  EpochRecord rec =
      epoch_record(epoch,
                   {loss_sum.item<double>(), static_cast<double>(correct.item<int64_t>()),
                    static_cast<double>(items)},
                   seconds_since(t0), warm);
  if (dist_->world_size > 1 && step_ > step0)
    rec.comm_per_step = comm.to_json(static_cast<double>(step_ - step0));
  return rec;
}

// The epoch's line: sums over all ranks (mean loss and accuracy of every item trained on) and
// the steady throughput, without the run's first step when this epoch had it and more steps.
EpochRecord Trainer::epoch_record(int64_t epoch, const std::array<double, 3>& local, double time_s,
                                  const WarmStep& warm) {
  auto sums = torch::tensor({local[0], local[1], local[2]}, torch::kFloat64);
  dist_->all_reduce_sum(sums);
  const double loss_sum = sums[0].item<double>(), correct = sums[1].item<double>();
  EpochRecord r;
  r.epoch = epoch + 1;
  r.num_epochs = opts_.num_epochs;
  r.step = step_;
  r.time_s = time_s;
  r.data_time_s = task_->data_wait_seconds();
  r.train_images = static_cast<int64_t>(sums[2].item<double>());
  r.train_loss = loss_sum / std::max<double>(1.0, static_cast<double>(r.train_images));
  r.train_acc = correct / std::max<double>(1.0, static_cast<double>(r.train_images));
  const int64_t steady_items = r.train_images - warm.items * dist_->data_world_size;
  const bool drop_warm = warm.items > 0 && steady_items > 0 && time_s > warm.seconds;
  r.images_per_s = drop_warm ? static_cast<double>(steady_items) / (time_s - warm.seconds)
                             : static_cast<double>(r.train_images) / std::max(1e-9, time_s);
  r.lr = learning_rate(*optimizer_);
  r.skipped_steps = scaler_->skipped_steps();
  task_->add_epoch_figures(r);
  return r;
}

void Trainer::evaluate(EpochRecord& rec) {
  model_->eval();
  torch::NoGradGuard no_grad;
  task_->evaluate(*model_, rec);
}

bool Trainer::stop_requested() {
  const int local = stop_signal_received();
  auto seen = torch::tensor(
      {static_cast<double>(local == SIGINT), static_cast<double>(local != 0 && local != SIGINT)},
      torch::kFloat64);
  if (dist_->world_size > 1) dist_->all_reduce_sum(seen);  // every rank stops at the same step
  stop_signal_ = agreed_stop_signal(local, static_cast<int>(seen[0].item<double>()),
                                    static_cast<int>(seen[1].item<double>()));
  return stop_signal_ != 0;
}

void Trainer::say_stopped(int64_t epoch, int64_t batch) const {
  const char* sig = stop_signal_ == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM";
  say(fmt::format("Stopped by {} at epoch {} batch {} of {} (step {})", sig, epoch + 1, batch,
                  train_batches_, step_));
  if (opts_.no_checkpoints)
    say("No checkpoint written (--no_checkpoints): a new run starts from scratch");
  else
    say(fmt::format("Checkpoint in {}; to resume, run the same command with --resume auto",
                    (out_dir_ / "checkpoints").string()));
}

// A run that cannot end inside its Slurm job's time limit, or a CPU run whose settings imply
// hours, says so early, with what changes it.
void Trainer::maybe_say_long_run(int64_t epoch, int64_t batches_done,
                                 double seconds_per_batch) const {
  if (!dist_->is_main()) return;
  const int64_t left = batches_left(opts_, train_batches_, step_, epoch, batches_done);
  const double seconds = seconds_per_batch * static_cast<double>(left);
  if (const auto job_left = launch::slurm_job_seconds_left(); job_left && seconds > *job_left)
    say(
        fmt::format("Warning: at {:.2f} s per batch the {} batches left take about {}, but this "
                    "Slurm job ends in {}: raise its time limit (--time), or train less; its "
                    "checkpoints let the next job go on with --resume auto",
                    seconds_per_batch, left, human_duration(seconds), human_duration(*job_left)));
  if (!device_.is_cpu() || seconds < 3600) return;
  say(fmt::format("Note: at {:.2f} s per batch on the CPU, the {} batches left take about {}; {}",
                  seconds_per_batch, left, human_duration(seconds), task_->long_run_hint()));
}

void Trainer::save_checkpoint_of(int64_t epochs_done, int64_t batches_done) {
  if (opts_.no_checkpoints) return;
  launch::heartbeat("checkpoint after epoch " + std::to_string(epochs_done));
  TrainState s;
  s.epoch = epochs_done;
  s.step = step_;
  s.batches_done = batches_done;
  s.seed = opts_.seed;
  s.world_size = dist_->world_size;
  s.scaler = scaler_->state();
  for (const auto& r : history_) s.history.push_back(r.to_json());
  s.options = options_to_json(opts_);
  const int keep = static_cast<int>(opts_.keep_checkpoints);
  // Sharded data parallel: every rank writes its shard; otherwise rank 0 writes the whole.
  if (!dist_->save_checkpoint(out_dir_ / "checkpoints", s, *model_, *optimizer_, keep) &&
      dist_->is_main())
    save_checkpoint(out_dir_ / "checkpoints", s, *model_, *optimizer_, keep);
  dist_->barrier();  // no rank runs ahead of a checkpoint that is not yet on disk
}

void Trainer::write_outputs(TrainResult& result) {
  result.output_dir = out_dir_;
  if (opts_.no_weights) return;
  dist_->gather_parameters(*model_);              // sharded: every rank takes part
  auto weights = dist_->model_stream(*model_);    // model parallel: joined on rank 0
  if (!dist_->is_main()) return drain(*weights);  // sending this rank's pieces
  for (const auto& line : task_->write_weights(*model_, *weights, out_dir_)) say(line);
  result.weights_file = hf_weights_path(out_dir_);
  if (opts_.no_report) return;
  const std::string data_name = task_->data_name();
  ReportInfo info;
  info.title = opts_.model + " on " + data_name;
  info.facts = {
      {"model", opts_.model},
      {"dataset", data_name},
      {"input size", task_->input_fact()},
      {"optimizer", fmt::format("{} lr={:g} wd={:g} schedule={}", opts_.optimizer,
                                opts_.learning_rate, opts_.weight_decay, opts_.lr_schedule)},
      {"batch size (per process)", std::to_string(batch_per_process_)},
      {"processes", std::to_string(dist_->world_size)},
      {"device", fmt::format("{} ({} threads)", device_.str(), threads_)},
      {"precision", opts_.precision},
      {"memory format", memory_format_.name}};
  for (auto& fact : best_result_facts(history_)) info.facts.push_back(std::move(fact));
  info.facts.emplace_back("training time (this run)", fmt::format("{:.2f}s", result.train_seconds));
  auto charts = task_->step_charts();
  if (charts.empty()) charts = {{"loss", "Training loss per step"}};
  for (const auto& [key, title] : charts) {
    StepChart c{title, {}};
    for (const auto& r : step_records_)
      if (r.contains(key) && r[key].is_number())
        c.points.emplace_back(r.value("step", 0.0), r[key].get<double>());
    info.step_charts.push_back(std::move(c));
  }
  result.report_file = out_dir_ / "report.html";
  write_report(result.report_file, info, history_);
  say("Report: " + result.report_file.string());
}

// A task's figures of the step just taken: its line, a "step" record in the log and the report.
void Trainer::after_optimizer_step(ProgressBar& bar) {
  if (step_losses_) step_losses_->end_step(step_);
  auto figures = task_->after_optimizer_step(step_);
  if (!figures) return;
  if (!figures->line.empty() && dist_->is_main()) {
    bar.clear();
    say(figures->line);
  }
  figures->record["type"] = "step";
  figures->record["step"] = step_;
  if (log_) log_->append(figures->record);
  step_records_.push_back(std::move(figures->record));
}

// The epoch's per-step training loss as "step" records (log and report), for a task without
// step figures of its own; every rank takes part (one all-reduce an epoch).
void Trainer::write_step_losses() {
  if (!step_losses_) return;
  for (auto& rec : step_losses_->take_epoch(*dist_)) {
    rec["type"] = "step";
    if (log_) log_->append(rec);
    step_records_.push_back(std::move(rec));
  }
}

// metrics.jsonl (rank 0): the run's facts, then the records a resumed run already had (epochs,
// and the step records up to the checkpoint's step), so the log never holds a step twice.
void Trainer::open_metrics_log() {
  if (!dist_->is_main()) return;
  if (!resumed_from_.empty()) {
    std::ifstream in(out_dir_ / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("type", "") == "step" && j.value("step", int64_t{0}) <= step_)
        step_records_.push_back(j);
    }
  }
  Json hist = Json::array();
  for (const auto& r : history_) hist.push_back(r.to_json());
  for (const auto& r : step_records_) hist.push_back(r);
  log_ = std::make_unique<MetricsLog>(out_dir_, hist,
                                      Json{{"type", "run"},
                                           {"options", options_to_json(opts_)},
                                           {"world_size", dist_->world_size},
                                           {"device", device_.str()},
                                           {"threads", threads_},
                                           {"memory_format", memory_format_.name},
                                           {"resumed_from", resumed_from_}});
}

TrainResult Trainer::run() {
  const StopSignalGuard stop_guard;
  phases_.time("set-up", [&] { setup_runtime(); });
  phases_.time("data", [&] { setup_data(); });
  phases_.time("model", [&] { setup_model(); });  // built on device_, which the header names
  phases_.time("optimizer", [&] { setup_optimizer(); });
  if (!opts_.resume.empty()) phases_.time("resume", [&] { maybe_resume(); });
  print_header();
  open_metrics_log();
  TrainResult result;
  const auto t0 = Clock::now();
  for (int64_t epoch = start_epoch_; epoch < opts_.num_epochs; ++epoch) {
    EpochRecord rec = train_one_epoch(epoch);
    if (stop_signal_ != 0) {
      // A partial epoch: no record, a checkpoint of where it stopped, and how to go on.
      save_checkpoint_of(epoch, stopped_at_batch_);
      say_stopped(epoch, stopped_at_batch_);
      if (log_) log_->append(Json{{"type", "stopped"}, {"epoch", epoch + 1}, {"step", step_}});
      result.stop_signal = stop_signal_;
      result.epochs = history_;
      return result;
    }
    const bool eval_now = (epoch + 1) % opts_.log_every == 0 || epoch + 1 == opts_.num_epochs;
    const bool stopped = max_steps_reached();
    if (eval_now || stopped) phases_.time("evaluation", [&] { evaluate(rec); });
    history_.push_back(rec);
    say(rec.line());
    if (rec.test_top1) say(rec.test_line());
    if (log_) log_->append(rec.to_json());
    ++result.epochs_run;
    if (stopped) {
      // A partial epoch is not a resumable state; --max_steps runs are smoke tests.
      say(fmt::format("Stopped after --max_steps {} optimizer steps", opts_.max_steps));
      break;
    }
    phases_.time("checkpoints", [&] { save_checkpoint_of(epoch + 1); });
  }
  result.train_seconds = seconds_since(t0);
  if (result.epochs_run == 0)
    say(fmt::format("Nothing to train: the checkpoint already holds {} of {} epochs", start_epoch_,
                    opts_.num_epochs));
  else
    say(fmt::format("Training took {:.2f}s for {} epochs", result.train_seconds,
                    result.epochs_run));
  phases_.time("final save", [&] { write_outputs(result); });
  say(phases_.line());
  if (log_)
    log_->append(Json{{"type", "end"},
                      {"train_seconds", result.train_seconds},
                      {"epochs_run", result.epochs_run},
                      {"phase_seconds", phases_.to_json()}});
  result.epochs = history_;
  return result;
}

}  // namespace gpulab::train
