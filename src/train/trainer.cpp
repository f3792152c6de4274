// The training loop, as named steps: set up, resume, then per epoch train, evaluate, log and
// checkpoint; at the end export weights and the report.
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "core/duration.h"
#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "launch/heartbeat.h"
#include "launch/launcher.h"
#include "launch/rank_env.h"
#include "launch/slurm_script.h"
#include "train/checkpoint.h"
#include "train/device.h"
#include "train/device_info.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/memory_format.h"
#include "train/memory_stats.h"
#include "train/models/attention_core.h"
#include "train/models/cpu_bf16_matmul.h"
#include "train/models/lm_families.h"
#include "train/models/registry.h"
#include "train/ops/cpu_kernels.h"
#include "train/optim/optimizers.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/resume_check.h"
#include "train/run_files.h"
#include "train/stop_signal.h"
#include "train/weights/safetensors.h"
#include "train/weights_export.h"

namespace gpulab::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The named language models sized for the data's vocabulary (the ones a first run starts with).
std::string shapes_taking_data_vocab() {
  std::vector<std::string> names;
  for (const auto& c : decoder_shapes())
    if (c.vocab_from_data) names.push_back(c.name);
  return join(names, ", ");
}

}  // namespace

int64_t batch_per_process(const TrainOptions& o, int world_size) {
  return o.batch_size_scaled ? o.batch_size / std::max(1, world_size) : o.batch_size;
}

void check_train_options(const TrainOptions& o, int world_size) {
  if (auto st = validate(o); !st) throw Exception(st.error());
  if (is_language_model(o.model) || is_text_dataset(o.dataset)) {
    if (!is_language_model(o.model))
      throw Exception(Code::kInvalidArgument,
                      "--dataset " + o.dataset + " trains a language model, not " + o.model,
                      "pass one of " + shapes_taking_data_vocab() + " (see `gpulab models`)");
    if (!is_text_dataset(o.dataset))
      throw Exception(
          Code::kInvalidArgument,
          "--model " + o.model + " is a language model; --dataset " + o.dataset + " holds images",
          "pass --dataset text --data_dir DIR (from `gpulab data tokenize`)");
    const DecoderConfig cfg = find_decoder_config(o.model).value_or_throw();
    if (o.seq_len > cfg.max_positions)
      throw Exception(Code::kInvalidArgument,
                      fmt::format("--seq_len {} is beyond {}'s {} positions", o.seq_len, cfg.name,
                                  cfg.max_positions),
                      fmt::format("pass --seq_len {} or less", cfg.max_positions));
    return;
  }
  int64_t alias_size = 0;
  find_model(o.model, &alias_size).value_or_throw();
  if (alias_size > 0 && alias_size != o.input_size)
    throw Exception(
        Code::kInvalidArgument,
        fmt::format("--model {} is built for {}x{} inputs, but --input_size is {}", o.model,
                    alias_size, alias_size, o.input_size),
        fmt::format("pass --input_size {} or use a model without a fixed size", alias_size));
  if (o.batch_size_scaled && o.batch_size < world_size)
    throw Exception(Code::kInvalidArgument,
                    fmt::format("--batch_size {} with --batch_size_scaled is smaller than the {} "
                                "processes",
                                o.batch_size, world_size),
                    "raise --batch_size or drop --batch_size_scaled");
}

Trainer::Trainer(TrainOptions opts, DistContextPtr dist)
    : opts_(std::move(opts)), dist_(std::move(dist)), out_dir_(effective_output_dir(opts_)) {}

Trainer::~Trainer() = default;

void Trainer::say(const std::string& line) const {
  if (!dist_->is_main()) return;
  std::cout << line << std::endl;
}

// Step 1: threads, device, seeds, determinism, precision.
void Trainer::setup_runtime() {
  check_train_options(opts_, dist_->world_size);
  set_cpu_kernels(opts_.cpu_kernels == "on");
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
  scaler_ = std::make_unique<LossScaler>(needs_loss_scaler(precision_));
}

// Step 2: data sets, samplers and loaders (the sampler comes from the distributed context).
void Trainer::setup_data() {
  if (lm_) {
    batch_per_process_ = batch_per_process(opts_, dist_->world_size);
    LmDataOptions lo;
    lo.batch_size = batch_per_process_;
    lo.seq_len = opts_.seq_len;
    lo.rank = dist_->rank;
    lo.world_size = dist_->world_size;
    lo.seed = static_cast<uint64_t>(opts_.seed);
    lm_data_ = open_lm_batches(opts_.dataset, opts_.data_dir, lo);
    train_batches_ = lm_data_->train_batches();
    if (opts_.limit_train_batches > 0)
      train_batches_ = std::min(train_batches_, opts_.limit_train_batches);
    return;
  }
  DatasetOptions dopts;
  dopts.image_size = opts_.input_size;
  dopts.seed = static_cast<uint64_t>(opts_.seed);
  train_set_ = open_dataset(opts_.dataset, opts_.data_dir, Split::kTrain, dopts);
  test_set_ = open_dataset(opts_.dataset, opts_.data_dir, Split::kTest, dopts);

  batch_per_process_ = batch_per_process(opts_, dist_->world_size);
  LoaderOptions lo;
  lo.batch_size = batch_per_process_;
  lo.num_workers = static_cast<int>(opts_.num_workers);
  // Auto: loader threads share the cores with the other ranks on this host, like intra-op ones.
  if (lo.num_workers < 0) lo.num_workers = auto_num_workers(dist_->local_world_size);
  lo.device = device_;
  lo.seed = static_cast<uint64_t>(opts_.seed);
  lo.transform.input_size = opts_.input_size;
  lo.transform.normalize = parse_normalization(opts_.normalize);
  lo.transform.augment = opts_.augment;
  const auto limit = [&](int64_t n) { return opts_.subset > 0 ? std::min(n, opts_.subset) : n; };
  const auto seed = static_cast<uint64_t>(opts_.seed);
  train_loader_ = std::make_unique<DataLoader>(
      train_set_, dist_->train_sampler(limit(train_set_->size()), seed), lo);
  LoaderOptions eo = lo;
  eo.transform.augment = false;
  test_loader_ =
      std::make_unique<DataLoader>(test_set_, dist_->eval_sampler(limit(test_set_->size())), eo);
  train_loader_->start_epoch(0);  // to learn the epoch length
  train_batches_ = train_loader_->batches_per_epoch();
  if (opts_.limit_train_batches > 0)
    train_batches_ = std::min(train_batches_, opts_.limit_train_batches);
  if (train_batches_ == 0)
    throw Exception(Code::kInvalidArgument, "the training set gives no batch on this process",
                    "lower --batch_size or raise --subset");
}

// Step 3: the model, on its device, in its memory format, identical on every rank.
void Trainer::setup_model() {
  if (lm_) return setup_language_model();
  // The name and its input size were checked in setup_runtime (check_train_options).
  ModelOptions mo;
  mo.num_classes = train_set_->num_classes();
  mo.image_size = opts_.input_size;
  model_ = create_model(opts_.model, mo);
  load_init_weights();
  model_->to(device_, compute_dtype_);
  memory_format_ =
      choose_memory_format(opts_, device_, find_model(opts_.model).value_or_throw()->family);
  if (memory_format_.channels_last) make_channels_last(*model_);
  dist_->prepare_model(*model_);
}

// Step 3 for a language model: its shape, the data's vocabulary, and the FLOPs behind MFU.
void Trainer::setup_language_model() {
  DecoderConfig cfg = find_decoder_config(opts_.model).value_or_throw();
  const int64_t data_vocab = lm_data_->vocab_size();
  if (cfg.vocab_from_data) {
    cfg.vocab_size = data_vocab;
  } else if (data_vocab > cfg.vocab_size) {
    throw Exception(Code::kInvalidArgument,
                    fmt::format("the token data's vocabulary ({}) is larger than {}'s ({})",
                                data_vocab, cfg.name, cfg.vocab_size),
                    fmt::format("tokenize with a vocabulary of at most {}, or use a shape that "
                                "takes the data's ({})",
                                cfg.vocab_size, shapes_taking_data_vocab()));
  }
  causal_lm_ = build_causal_lm(cfg, device_);  // built where it trains
  causal_lm_->set_activation_checkpointing(opts_.activation_checkpointing);
  causal_lm_->set_fused_attention(opts_.attention == "gpulab");
  model_ = causal_lm_;
  load_init_weights();
  model_->to(device_, compute_dtype_);
  memory_format_ = {false, "contiguous", "language model"};
  dist_->prepare_model(*model_);
  flops_per_token_ = cfg.train_flops_per_token(opts_.seq_len);
  // A GPU's datasheet peak for the precision the matrix products run in (fp16 = bf16 there).
  const std::string& p = opts_.precision;
  peak_ = device_.is_cpu()
              ? peak_flops(device_, precision_ == Precision::kBf16)
              : datasheet_peak(describe_device(device_).name, p == "bf16" || p == "fp16" ? "bf16"
                                                              : p == "tf32"              ? "tf32"
                                                                                         : "fp32");
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
  // A language model's Hugging Face file may name tensors otherwise (GPT-2's hub layout).
  if (causal_lm_) *tensors = from_hf_names(causal_lm_->config(), std::move(*tensors));
  if (auto st = load_state_dict(*model_, *tensors, "--init_weights " + opts_.init_weights); !st)
    throw Exception(st.error());
}

void Trainer::add_lm_metrics(EpochRecord& rec) const {
  EpochRecord::Lm s;
  s.tokens_per_s = rec.images_per_s;
  s.tokens_per_s_per_device = rec.images_per_s / dist_->world_size;
  s.tflops_per_device = s.tokens_per_s_per_device * flops_per_token_ / 1e12;
  s.mfu = peak_.flops > 0 ? s.tflops_per_device * 1e12 / peak_.flops : 0;
  s.peak_host_memory_bytes = static_cast<double>(peak_host_memory_bytes());
  if (const auto peak = device_memory_peak(device_)) {
    s.peak_device_allocated_bytes = static_cast<double>(peak->allocated_bytes);
    s.peak_device_reserved_bytes = static_cast<double>(peak->reserved_bytes);
  }
  rec.lm = s;
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
  s.steps_per_epoch = (train_batches_ + opts_.grad_accum - 1) / opts_.grad_accum;
  s.total_epochs = opts_.num_epochs;
  s.warmup_epochs = opts_.warmup_epochs;
  s.step_size = opts_.step_size;
  s.gamma = opts_.gamma;
  schedule_ = std::make_unique<LrSchedule>(s);
}

// Step 5: --resume auto | PATH restores everything a checkpoint holds.
void Trainer::maybe_resume() {
  if (opts_.resume.empty()) return;
  std::optional<CheckpointInfo> ckpt;
  if (opts_.resume == "auto") {
    ckpt = find_resumable(out_dir_ / "checkpoints");
    if (!ckpt) {
      say("No complete checkpoint in " + (out_dir_ / "checkpoints").string() +
          "; starting from scratch");
      return;
    }
  } else {
    ckpt = checkpoint_at(opts_.resume).value_or_throw();
  }
  auto sharded = dist_->load_checkpoint(*ckpt, *model_, *optimizer_);
  if (!sharded && dist::is_sharded_checkpoint(*ckpt))
    throw Exception(
        Code::kInvalidArgument,
        "checkpoint " + ckpt->manifest.string() + " was written with --shard (one file per rank)",
        "resume it with the --shard it was trained with, or start a new run in "
        "another --output_dir");
  TrainState s = (sharded ? std::move(*sharded) : load_checkpoint(*ckpt, *model_, *optimizer_))
                     .value_or_throw();
  // Loading replaces the parameters' storage with the file's layout (a checkpoint written in
  // the other layout); this run's layout is the one chosen above. (Sharded loading keeps it.)
  if (memory_format_.channels_last && !sharded) make_channels_last(*model_);
  // Nothing is written before this check: a refused resume leaves the run as it was.
  if (auto st = check_resume_options(s.options, options_to_json(opts_),
                                     (sharded ? ckpt->manifest : ckpt->file).string());
      !st)
    throw Exception(st.error());
  start_epoch_ = s.epoch;
  step_ = s.step;
  resume_batches_ = s.batches_done;
  scaler_->load(s.scaler);
  for (const auto& r : s.history) history_.push_back(EpochRecord::from_json(r));
  resumed_from_ = (sharded ? ckpt->manifest : ckpt->file).string();
}

void Trainer::print_header() const {
  if (!dist_->is_main()) return;
  if (lm_) {
    const DecoderConfig& c = causal_lm_->config();
    say(
        fmt::format("Training {} on {} ({} parameters, {} layers, {} heads / {} kv heads, "
                    "vocabulary {})",
                    opts_.model, lm_data_->name(), c.num_parameters(), c.num_layers, c.num_heads,
                    c.num_kv_heads, c.vocab_size));
    say(fmt::format("Sequence length {}, batch {} per process ({} tokens), {} steps per epoch{}",
                    opts_.seq_len, batch_per_process_, batch_per_process_ * opts_.seq_len,
                    schedule_->spec().steps_per_epoch,
                    opts_.grad_accum > 1 ? fmt::format(", grad_accum {}", opts_.grad_accum) : ""));
    say(
        fmt::format("Using {} optimizer with lr={:g}, weight_decay={:g}, schedule={} (warmup {} "
                    "steps), clip_grad={:g}",
                    opts_.optimizer, opts_.learning_rate, opts_.weight_decay, opts_.lr_schedule,
                    schedule_->warmup_steps(), opts_.clip_grad));
    if (!opts_.model_defaults.empty())
      say(fmt::format("Language-model defaults for flags not passed: {}",
                      join(opts_.model_defaults, ", ")));
    if (!opts_.init_weights.empty()) say("Initial weights: " + opts_.init_weights);
    say(fmt::format("Device: {}, Threads: {}, Precision: {}, World size: {}, Backend: {}",
                    device_.str(), threads_, opts_.precision, dist_->world_size, dist_->backend()));
    // Autocast's products (and so the attention's inputs) are in the autocast dtype.
    const auto products = precision_ == Precision::kBf16   ? torch::kBFloat16
                          : precision_ == Precision::kFp16 ? torch::kHalf
                                                           : compute_dtype_;
    say(fmt::format("Attention: {}; activation checkpointing {}",
                    attention_path(device_, products, opts_.attention == "gpulab"),
                    opts_.activation_checkpointing ? "on" : "off"));
    say(fmt::format("FLOPs per token: {:.4g} (6N + attention); peak for MFU: {}", flops_per_token_,
                    peak_.flops > 0
                        ? fmt::format("{:.2f} TFLOPS, {}", peak_.flops / 1e12, peak_.source)
                        : std::string("unknown for this device (MFU shows 0)")));
    if (!precision_note_.empty()) say(precision_note_);
    if (opts_.precision == "bf16" && device_.is_cpu() && cpu_bf16_gemm_is_slow())
      say("bf16 matrix products: fp32 GEMM on bf16 operands, bf16 results (this CPU has no bf16 "
          "GEMM kernels; libtorch's fallback loop is ~15x slower)");
    if (!resumed_from_.empty())
      say(fmt::format("Resumed from {} (epoch {}, step {})", resumed_from_, start_epoch_, step_));
    say("");
    return;
  }
  const auto& shape = train_set_->image_shape();
  if (opts_.num_workers < 0)
    say(fmt::format("Auto-detected num_workers: {}", train_loader_->num_workers()));
  say(fmt::format("Training {} on {} dataset", opts_.model, train_set_->name()));
  if (const std::string from = train_set_->source(); !from.empty()) say("Data: " + from);
  // With --subset the run trains and tests on the first N images: those are the counts shown.
  const auto used = [&](int64_t n) { return opts_.subset > 0 ? std::min(n, opts_.subset) : n; };
  say(fmt::format("Input size: {}x{}, Classes: {} (stored {}x{}x{}, {} train / {} test images{})",
                  opts_.input_size, opts_.input_size, train_set_->num_classes(), shape[0], shape[1],
                  shape[2], used(train_set_->size()), used(test_set_->size()),
                  opts_.subset > 0 ? fmt::format(" with --subset {}, of {} / {}", opts_.subset,
                                                 train_set_->size(), test_set_->size())
                                   : ""));
  say(fmt::format("Using {} optimizer with lr={:g}, weight_decay={:g}{}", opts_.optimizer,
                  opts_.learning_rate, opts_.weight_decay,
                  opts_.lr_schedule == "none"
                      ? std::string()
                      : fmt::format(", schedule={} (warmup {} steps)", opts_.lr_schedule,
                                    schedule_->warmup_steps())));
  if (!opts_.init_weights.empty()) say("Initial weights: " + opts_.init_weights);
  say(fmt::format("Batch size: {} (per process), {} steps per epoch{}", batch_per_process_,
                  schedule_->spec().steps_per_epoch,
                  opts_.grad_accum > 1 ? fmt::format(", grad_accum {}", opts_.grad_accum) : ""));
  say(fmt::format("Workers: {}, Backend: {}, World size: {}", train_loader_->num_workers(),
                  dist_->backend(), dist_->world_size));
  say(fmt::format(
      "Device: {}, Threads: {}{}, Precision: {}{}", device_.str(), threads_,
      opts_.threads <= 0 && dist_->local_world_size > 1
          ? fmt::format(" per rank (cores split between {} local ranks)", dist_->local_world_size)
          : "",
      opts_.precision, memory_format_.channels_last ? ", channels_last" : ""));
  say(fmt::format("Memory format: {} ({})", memory_format_.name, memory_format_.reason));
  say("Normalization: " + opts_.normalize);
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
  const bool finite = scaler_->unscale(*optimizer_);
  if (finite && opts_.clip_grad > 0) dist_->clip_grad_norm(*model_, opts_.clip_grad);
  if (finite) optimizer_->step();
  scaler_->update(!finite);
  dist_->after_step(*model_, *optimizer_);
  for (auto& p : model_->parameters()) p.mutable_grad().reset();  // set_to_none
  ++step_;
}

EpochRecord Trainer::train_one_epoch(int64_t epoch) {
  model_->train();
  if (!lm_) {
    train_loader_->start_epoch(epoch);
    train_loader_->reset_stats();
  }
  ProgressBar bar(dist_->is_main(), train_batches_,
                  fmt::format("Epoch {}/{}", epoch + 1, opts_.num_epochs));
  bar.set_later_batches((opts_.num_epochs - epoch - 1) * train_batches_);
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().device(device_));
  torch::Tensor correct =
      torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device_));
  int64_t images = 0;
  WarmStep warm;
  const auto t0 = Clock::now();
  const int64_t accum = opts_.grad_accum;
  // A run stopped inside this epoch resumes after the batches it trained (same data order).
  const int64_t first = epoch == start_epoch_ ? std::min(resume_batches_, train_batches_) : 0;
  if (!lm_)  // token batches are indexed by step; the image loader is skipped forward
    for (int64_t b = 0; b < first; ++b) (void)train_loader_->next();
  for (int64_t b = first; b < train_batches_; ++b) {
    if (max_steps_reached()) break;
    if (b % accum == 0 && stop_requested()) {
      stopped_at_batch_ = b;
      // No worker builds batches of this epoch while the checkpoint is written and the run ends.
      if (!lm_) train_loader_->abandon_epoch();
      break;
    }
    torch::Tensor x, labels;
    if (lm_) {
      // A language model: next-token targets for every position, one class per token.
      LmBatch tb = lm_data_->train_batch(epoch * train_batches_ + b);
      x = tb.inputs.to(device_);
      labels = tb.targets.to(device_).reshape({-1});
    } else {
      auto batch = train_loader_->next();
      if (!batch) break;
      x = batch->images.to(compute_dtype_);
      labels = batch->labels;
      if (memory_format_.channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    }
    if (hooks_.batch_ready) hooks_.batch_ready(micro_steps_);
    launch::heartbeat(fmt::format("epoch {} batch {} of {}", epoch + 1, b + 1, train_batches_));
    // Named steps of one micro-batch: lr, forward, loss, backward, (step), bookkeeping.
    const int64_t group_start = b / accum * accum;
    const int64_t group_size = std::min(accum, train_batches_ - group_start);
    const bool last_micro = b == group_start + group_size - 1;
    if (b == group_start) set_learning_rate(*optimizer_, schedule_->lr_at(step_));
    dist_->before_backward(*model_, last_micro);
    torch::Tensor logits, loss;
    {
      AutocastGuard autocast(precision_, device_);
      logits = model_->forward(x);
    }
    if (lm_) logits = logits.reshape({-1, logits.size(-1)});
    loss = torch::nn::functional::cross_entropy(
        logits.to(compute_dtype_), labels,
        torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(opts_.label_smoothing));
    scaler_->scale_loss(loss / static_cast<double>(group_size)).backward();
    if (last_micro) optimizer_step();

    const int64_t n = labels.size(0);
    images += n;
    loss_sum += loss.detach() * static_cast<double>(n);
    correct += logits.detach().argmax(1).eq(labels).sum();
    if (bar.due(b + 1))
      bar.update(b + 1,
                 fmt::format("loss {:.4f}, {:.0f} {}/s", loss.item<double>(),
                             static_cast<double>(images) / seconds_since(t0), lm_ ? "tok" : "img"));
    if (hooks_.step_done) hooks_.step_done(micro_steps_);
    if (micro_steps_ == 0) {
      // The run's first step warms up (kernel choice, allocator, lazy initialisation): timed on
      // its own and left out of the epoch's throughput. A GPU is done when its queue is.
      if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
      warm.seconds = seconds_since(t0);
      warm.images = n;
      phases_.add("first step", warm.seconds);
    }
    ++micro_steps_;
    // The first batch warms up; the next five (across epochs when they are short) give the
    // estimate of a long run.
    if (micro_steps_ == 1) estimate_t0_ = Clock::now();
    if (micro_steps_ == 6) maybe_say_long_run(epoch, b + 1, seconds_since(estimate_t0_) / 5.0);
  }
  bar.clear();
  return epoch_record(epoch,
                      {loss_sum.item<double>(), static_cast<double>(correct.item<int64_t>()),
                       static_cast<double>(images)},
                      seconds_since(t0), warm);
}

// The epoch's line: sums over all ranks (mean loss and accuracy of every image trained on) and
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
  r.data_time_s = lm_ ? 0.0 : train_loader_->data_wait_seconds();
  r.train_images = static_cast<int64_t>(sums[2].item<double>());
  r.train_loss = loss_sum / std::max<double>(1.0, static_cast<double>(r.train_images));
  r.train_acc = correct / std::max<double>(1.0, static_cast<double>(r.train_images));
  const int64_t steady_images = r.train_images - warm.images * dist_->world_size;
  const bool drop_warm = warm.images > 0 && steady_images > 0 && time_s > warm.seconds;
  r.images_per_s = drop_warm ? static_cast<double>(steady_images) / (time_s - warm.seconds)
                             : static_cast<double>(r.train_images) / std::max(1e-9, time_s);
  r.lr = learning_rate(*optimizer_);
  r.skipped_steps = scaler_->skipped_steps();
  if (lm_) add_lm_metrics(r);
  return r;
}

// Exact, unpadded evaluation: every test image counted once over all ranks (sum, then divide).
void Trainer::evaluate(EpochRecord& rec) {
  model_->eval();
  torch::NoGradGuard no_grad;
  if (!lm_) test_loader_->start_epoch(0);
  auto sums = torch::zeros({4}, torch::kFloat64);  // loss sum, top-1, top-5, images
  int64_t b = 0;
  // The next held-out batch: token windows for a language model, else the test loader's.
  const auto next_batch = [&]() -> std::optional<std::pair<torch::Tensor, torch::Tensor>> {
    if (lm_) {
      if (b >= lm_data_->val_batches()) return std::nullopt;
      LmBatch tb = lm_data_->val_batch(b);
      return std::pair{tb.inputs.to(device_), tb.targets.to(device_).reshape({-1})};
    }
    auto batch = test_loader_->next();
    if (!batch) return std::nullopt;
    torch::Tensor x = batch->images.to(compute_dtype_);
    if (memory_format_.channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    return std::pair{x, batch->labels};
  };
  while (auto batch = next_batch()) {
    if (opts_.limit_eval_batches > 0 && b >= opts_.limit_eval_batches) break;
    launch::heartbeat(fmt::format("evaluation batch {}", ++b));
    torch::Tensor logits;
    {
      AutocastGuard autocast(precision_, device_);
      logits = model_->forward(batch->first).to(compute_dtype_);
    }
    if (lm_) logits = logits.reshape({-1, logits.size(-1)});
    const auto& y = batch->second;
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    auto topk = std::get<1>(logits.topk(k, 1));
    auto hits = topk.eq(y.unsqueeze(1));
    sums[0] +=
        torch::nn::functional::cross_entropy(
            logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    sums[1] += hits.select(1, 0).sum().item<double>();
    sums[2] += hits.any(1).sum().item<double>();
    sums[3] += static_cast<double>(y.size(0));
  }
  dist_->all_reduce_sum(sums);
  const double n = std::max(1.0, sums[3].item<double>());
  rec.test_loss = sums[0].item<double>() / n;
  rec.test_top1 = sums[1].item<double>() / n;
  rec.test_top5 = sums[2].item<double>() / n;
  rec.test_images = static_cast<int64_t>(sums[3].item<double>());
  // Bits per byte: nats per token over ln 2, spread over the bytes of text a token stands for.
  if (lm_ && rec.lm && lm_data_->bytes_per_token() > 0)
    rec.lm->val_bits_per_byte = *rec.test_loss / std::log(2.0) / lm_data_->bytes_per_token();
}

bool Trainer::stop_requested() {
  const int local = stop_signal_received();
  auto any = torch::full({1}, static_cast<double>(local != 0), torch::kFloat64);
  if (dist_->world_size > 1) dist_->all_reduce_sum(any);  // every rank stops at the same step
  if (any.item<double>() == 0) return false;
  stop_signal_ = local != 0 ? local : SIGTERM;
  return true;
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
  int64_t left = (opts_.num_epochs - epoch) * train_batches_ - batches_done;
  if (opts_.max_steps > 0) left = std::min(left, (opts_.max_steps - step_) * opts_.grad_accum);
  const double seconds = seconds_per_batch * static_cast<double>(left);
  if (const auto job_left = launch::slurm_job_seconds_left(); job_left && seconds > *job_left)
    say(
        fmt::format("Warning: at {:.2f} s per batch the {} batches left take about {}, but this "
                    "Slurm job ends in {}: raise its time limit (--time), or train less; its "
                    "checkpoints let the next job go on with --resume auto",
                    seconds_per_batch, left, human_duration(seconds), human_duration(*job_left)));
  if (!device_.is_cpu() || seconds < 3600) return;
  if (lm_) {
    say(
        fmt::format("Note: at {:.2f} s per batch on the CPU, the {} batches left take about {}; "
                    "--max_steps, a smaller --seq_len or a GPU shortens it",
                    seconds_per_batch, left, human_duration(seconds)));
    return;
  }
  const auto& shape = train_set_->image_shape();
  const int64_t stored = std::max(shape[1], shape[2]);
  const int64_t smaller =
      std::max<int64_t>({find_model(opts_.model).value_or_throw()->min_image_size, stored, 32});
  std::string fix = "--subset N, fewer --num_epochs or a GPU shortens it";
  if (smaller < opts_.input_size)
    fix = fmt::format(
        "--input_size {} (now {}; the images are stored at {}x{}) has {:.0f}x fewer pixels to "
        "compute on",
        smaller, opts_.input_size, shape[1], shape[2],
        std::pow(static_cast<double>(opts_.input_size) / static_cast<double>(smaller), 2.0));
  say(fmt::format("Note: at {:.2f} s per batch on the CPU, the {} batches left take about {}; {}",
                  seconds_per_batch, left, human_duration(seconds), fix));
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
  dist_->gather_parameters(*model_);  // sharded: every rank takes part
  if (!dist_->is_main()) return;
  result.weights_file = out_dir_ / "model.safetensors";
  if (lm_) {
    // A Hugging Face folder: transformers' from_pretrained and `gpulab generate` read the run.
    write_hf_folder(out_dir_, causal_lm_->config(), module_state_dict(*model_),
                    lm_data_->tokenizer_spec(), "gpulab train");
    say("Weights: " + result.weights_file.string());
    say("Config: " + (out_dir_ / "config.json").string());
  } else {
    export_weights(*model_, result.weights_file);
    say("Weights: " + result.weights_file.string());
  }
  if (opts_.no_report) return;
  const std::string data_name = lm_ ? lm_data_->name() : train_set_->name();
  ReportInfo info;
  info.title = opts_.model + " on " + data_name;
  info.facts = {
      {"model", opts_.model},
      {"dataset", data_name},
      {"input size",
       lm_ ? fmt::format("{} tokens", opts_.seq_len) : std::to_string(opts_.input_size)},
      {"optimizer", fmt::format("{} lr={:g} wd={:g} schedule={}", opts_.optimizer,
                                opts_.learning_rate, opts_.weight_decay, opts_.lr_schedule)},
      {"batch size (per process)", std::to_string(batch_per_process_)},
      {"processes", std::to_string(dist_->world_size)},
      {"device", fmt::format("{} ({} threads)", device_.str(), threads_)},
      {"precision", opts_.precision},
      {"memory format", memory_format_.name}};
  for (auto& fact : best_result_facts(history_)) info.facts.push_back(std::move(fact));
  info.facts.emplace_back("training time (this run)", fmt::format("{:.2f}s", result.train_seconds));
  result.report_file = out_dir_ / "report.html";
  write_report(result.report_file, info, history_);
  say("Report: " + result.report_file.string());
}

TrainResult Trainer::run() {
  const StopSignalGuard stop_guard;
  lm_ = is_language_model(opts_.model);
  phases_.time("set-up", [&] { setup_runtime(); });
  phases_.time("data", [&] { setup_data(); });
  phases_.time("model", [&] { setup_model(); });  // built on device_, which the header names
  phases_.time("optimizer", [&] { setup_optimizer(); });
  if (!opts_.resume.empty()) phases_.time("resume", [&] { maybe_resume(); });
  print_header();
  std::unique_ptr<MetricsLog> log;
  if (dist_->is_main()) {
    Json hist = Json::array();
    for (const auto& r : history_) hist.push_back(r.to_json());
    log = std::make_unique<MetricsLog>(out_dir_, hist,
                                       Json{{"type", "run"},
                                            {"options", options_to_json(opts_)},
                                            {"world_size", dist_->world_size},
                                            {"device", device_.str()},
                                            {"threads", threads_},
                                            {"memory_format", memory_format_.name},
                                            {"resumed_from", resumed_from_}});
  }
  TrainResult result;
  const auto t0 = Clock::now();
  for (int64_t epoch = start_epoch_; epoch < opts_.num_epochs; ++epoch) {
    EpochRecord rec = train_one_epoch(epoch);
    if (stop_signal_ != 0) {
      // A partial epoch: no record, a checkpoint of where it stopped, and how to go on.
      save_checkpoint_of(epoch, stopped_at_batch_);
      say_stopped(epoch, stopped_at_batch_);
      if (log) log->append(Json{{"type", "stopped"}, {"epoch", epoch + 1}, {"step", step_}});
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
    if (log) log->append(rec.to_json());
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
  if (log)
    log->append(Json{{"type", "end"},
                     {"train_seconds", result.train_seconds},
                     {"epochs_run", result.epochs_run},
                     {"phase_seconds", phases_.to_json()}});
  result.epochs = history_;
  return result;
}

}  // namespace gpulab::train
