// Language modelling's data, decoder, loss, evaluation, figures, header and outputs for the
// trainer.
#include "train/tasks/lm_task.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "train/device_info.h"
#include "train/memory_stats.h"
#include "train/models/attention_core.h"
#include "train/models/cpu_bf16_matmul.h"
#include "train/models/lm_families.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/pipeline_executor.h"
#include "train/parallel/pipeline_options.h"
#include "train/parallel/tp_families.h"
#include "train/tasks/class_metrics.h"
#include "train/weights/hf_shards.h"
#include "train/weights_export.h"

namespace gpulab::train {

void apply_decoder_options(CausalLm& model, const TrainOptions& o) {
  model.set_activation_checkpointing(o.activation_checkpointing);
  model.set_fused_attention(o.attention == "gpulab");
}

LmTask::LmTask(const TaskEnv& env) : env_(env) {}

LmTask::~LmTask() = default;

int64_t LmTask::open_data() {
  LmDataOptions lo;
  lo.batch_size = env_.batch_per_process;
  lo.seq_len = env_.opts.seq_len;
  lo.rank = env_.dist.data_rank;  // a tensor-parallel group reads one batch
  lo.world_size = env_.dist.data_world_size;
  lo.seed = static_cast<uint64_t>(env_.opts.seed);
  data_ = open_lm_batches(env_.opts.dataset, env_.opts.data_dir, lo);
  return data_->train_batches();
}

// Its shape, the data's vocabulary, and the FLOPs and peak behind MFU.
ClassifierPtr LmTask::build_model() {
  const TrainOptions& o = env_.opts;
  DecoderConfig cfg = find_decoder_config(o.model).value_or_throw();
  const int64_t data_vocab = data_->vocab_size();
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
  if (auto* mesh = env_.dist.pipeline_mesh()) {
    model_ = build_stage(cfg, *mesh);
  } else if (auto* group = env_.dist.tp_group()) {
    // This rank's shard of the very weights the one-process run starts from (same seed), drawn
    // a tensor at a time: the whole model is never held.
    auto tp = parallel::build_tp_causal_lm(cfg, *group, env_.device);
    tp->sequence_parallel = o.sequence_parallel == "on";
    tp->label_smoothing = o.label_smoothing;
    tp_ = tp.get();
    const auto element = static_cast<int64_t>(tp->parameters().front().element_size());
    tp_bytes_ = {held_parameter_bytes(*tp),
                 cfg.num_parameters() * element};  // this rank's, the whole's
    model_ = std::move(tp);
  } else {
    model_ = build_causal_lm(cfg, env_.device);  // built where it trains
  }
  apply_decoder_options(*model_, o);
  flops_per_token_ = cfg.train_flops_per_token(o.seq_len);
  // A GPU's datasheet peak for the precision the matrix products run in (fp16 = bf16 there).
  const std::string& p = o.precision;
  peak_ = env_.device.is_cpu() ? peak_flops(env_.device, env_.precision == Precision::kBf16)
                               : datasheet_peak(describe_device(env_.device).name,
                                                p == "bf16" || p == "fp16" ? "bf16"
                                                : p == "tf32"              ? "tf32"
                                                                           : "fp32");
  return model_;
}

// The stage's pieces alone, initialised as the whole model would be from the same seed (then,
// under --tp, split over the TP group); the blocks split by the FLOPs cost model, the embedding
// and the head counted.
CausalLmPtr LmTask::build_stage(const DecoderConfig& cfg, parallel::DeviceMesh& mesh) {
  const parallel::PipelineShape shape = parallel::pipeline_shape(env_.opts, env_.batch_per_process);
  auto spans = parallel::split_stages(cfg.num_layers, shape.stages, shape.virtual_stages,
                                      parallel::decoder_stage_costs(cfg, env_.opts.seq_len));
  if (auto* group = env_.dist.tp_group()) {
    // This rank's shard of the stage's pieces of the very weights the one-process run starts
    // from (same seed), drawn a tensor at a time: neither the model nor the stage is held whole.
    const bool sp = env_.opts.sequence_parallel == "on";
    const auto build = [&](const ModelPart& part) -> CausalLmPtr {
      auto tp = parallel::build_tp_causal_lm(cfg, *group, env_.device, part);
      tp->sequence_parallel = sp;
      tp->label_smoothing = env_.opts.label_smoothing;
      tp_ = tp.get();
      return tp;
    };
    stage_ = std::make_unique<parallel::PipelineStage>(cfg, shape, std::move(spans),
                                                       mesh.coord().pp, env_.compute_dtype, build,
                                                       sp ? group->size() : 1);
  } else {
    stage_ = std::make_unique<parallel::PipelineStage>(
        cfg, shape, std::move(spans), mesh.coord().pp, env_.device, env_.compute_dtype);
  }
  pipe_ = std::make_unique<parallel::PipelineExecutor>(
      *stage_, mesh.pp(), parallel::PipelineRunOptions{env_.precision, env_.opts.label_smoothing});
  auto bytes = torch::zeros({shape.stages}, torch::kDouble);
  bytes[mesh.coord().pp] = static_cast<double>(stage_->parameter_bytes());
  bytes = bytes.to(mesh.pp().device());
  mesh.pp().allreduce_sum(bytes, "every pipeline stage's parameter bytes");
  bytes = bytes.cpu();
  for (int64_t s = 0; s < shape.stages; ++s) stage_bytes_.push_back(bytes[s].item<double>());
  if (tp_) {
    // The largest share any rank of the mesh holds.
    auto most = torch::full({1}, static_cast<double>(stage_->parameter_bytes()), torch::kDouble);
    most = most.to(mesh.world().device());
    mesh.world().allreduce_max(most, "the largest parameter bytes of a rank");
    rank_bytes_max_ = most.cpu().item<double>();
  }
  return stage_->model_ptr();
}

void LmTask::start_epoch(int64_t /*epoch*/, int64_t /*skip*/) {
  pipe_wait_s_ = pipe_wall_s_ = pipe_first_wait_s_ = pipe_first_wall_s_ = 0;
  pipe_bubbles_.clear();
}

// The pipeline's step: every stage runs its schedule; the loss and hits are the last stage's.
std::optional<StepLoss> LmTask::forward_backward(const TaskBatch& batch, const AccumPlace& place) {
  if (!pipe_) return std::nullopt;
  const auto r = pipe_->step(batch.inputs, batch.targets.reshape(batch.inputs.sizes()),
                             place.group_size, place.last, place.loss_scale);
  if (pipe_bubbles_.empty()) {
    pipe_first_wait_s_ = r.wait_s;
    pipe_first_wall_s_ = r.wall_s;
  }
  pipe_wait_s_ += r.wait_s;
  pipe_wall_s_ += r.wall_s;
  pipe_bubbles_.push_back(r.bubble_fraction());
  const auto on = torch::TensorOptions().device(env_.device);
  return StepLoss{torch::tensor(r.loss, on.dtype(env_.compute_dtype)),
                  torch::tensor(static_cast<int64_t>(r.correct), on.dtype(torch::kLong)),
                  batch.targets.numel()};
}

// A Hugging Face file may name tensors otherwise (GPT-2's hub layout).
StateDict LmTask::init_weight_names(StateDict weights) const {
  auto named = from_hf_names(model_->config(), std::move(weights));
  return tp_ ? tp_->shard(named) : named;  // tensor parallel: this rank's shard
}

MemoryFormatChoice LmTask::memory_format(Classifier& /*model*/) {
  return {false, "contiguous", "language model"};
}

// Next-token targets for every position, one class per token.
TaskBatch LmTask::to_device(LmBatch batch) const {
  return {batch.inputs.to(env_.device), batch.targets.to(env_.device).reshape({-1}), {}};
}

std::optional<TaskBatch> LmTask::next_batch(int64_t index) {
  return to_device(data_->train_batch(index));
}

StepLoss LmTask::loss(const torch::Tensor& outputs, const TaskBatch& batch) const {
  if (!tp_) return class_loss(outputs, batch.targets, env_);
  // This rank's vocabulary columns: the loss and argmax reduce over the group, never gathered.
  auto [loss, correct] = tp_->loss_of(outputs.to(env_.compute_dtype), batch.targets);
  return {loss, correct, batch.targets.size(0)};
}

void LmTask::add_epoch_figures(EpochRecord& rec) const {
  EpochRecord::Lm s;
  s.tokens_per_s = rec.images_per_s;
  s.tokens_per_s_per_device = rec.images_per_s / env_.dist.world_size;
  s.tflops_per_device = s.tokens_per_s_per_device * flops_per_token_ / 1e12;
  s.mfu = peak_.flops > 0 ? s.tflops_per_device * 1e12 / peak_.flops : 0;
  s.peak_host_memory_bytes = static_cast<double>(peak_host_memory_bytes());
  if (pipe_) {
    const bool more = pipe_bubbles_.size() > 1;  // the first step left out where there are more
    const double wait = pipe_wait_s_ - (more ? pipe_first_wait_s_ : 0);
    const double wall = pipe_wall_s_ - (more ? pipe_first_wall_s_ : 0);
    s.pipeline_idle_fraction = wall > 0 ? wait / wall : 0;
    // The median flush: a flush in which the OS held a rank back (a loaded machine) waits longer.
    if (!pipe_bubbles_.empty()) {
      auto b = pipe_bubbles_;
      std::nth_element(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(b.size() / 2), b.end());
      s.pipeline_bubble_fraction = b[b.size() / 2];
    }
  }
  if (const auto peak = device_memory_peak(env_.device)) {
    s.peak_device_allocated_bytes = static_cast<double>(peak->allocated_bytes);
    s.peak_device_reserved_bytes = static_cast<double>(peak->reserved_bytes);
  }
  rec.lm = s;
}

void LmTask::evaluate(Classifier& model, EpochRecord& rec) {
  int64_t b = 0;
  evaluate_classes(
      model,
      [&]() -> std::optional<TaskBatch> {
        if (b >= data_->val_batches()) return std::nullopt;
        return to_device(data_->val_batch(b++));
      },
      env_, rec,
      pipe_ ? BatchEvaluator([this](const TaskBatch& batch) -> EvalSums {
        const auto s = pipe_->evaluate(batch.inputs, batch.targets.reshape(batch.inputs.sizes()));
        return {s.loss_sum, s.top1, s.top5, s.count};
      })
            : BatchEvaluator());
  // Bits per byte: nats per token over ln 2, spread over the bytes of text a token stands for.
  if (rec.lm && data_->bytes_per_token() > 0)
    rec.lm->val_bits_per_byte = *rec.test_loss / std::log(2.0) / data_->bytes_per_token();
}

std::vector<std::string> LmTask::header(const RunFacts& facts) const {
  const TrainOptions& o = env_.opts;
  const DecoderConfig& c = model_->config();
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "Training {} on {} ({} parameters, {} layers, {} heads / {} kv heads, vocabulary {})",
      o.model, data_->name(), c.num_parameters(), c.num_layers, c.num_heads, c.num_kv_heads,
      c.vocab_size));
  lines.push_back(fmt::format(
      "Sequence length {}, batch {} per process ({} tokens), {} steps per epoch{}", o.seq_len,
      env_.batch_per_process, env_.batch_per_process * o.seq_len, facts.steps_per_epoch,
      o.grad_accum > 1 ? fmt::format(", grad_accum {}", o.grad_accum) : ""));
  lines.push_back(
      fmt::format("Using {} optimizer with lr={:g}, weight_decay={:g}, schedule={} (warmup {} "
                  "steps), clip_grad={:g}",
                  o.optimizer, o.learning_rate, o.weight_decay, o.lr_schedule, facts.warmup_steps,
                  o.clip_grad));
  if (!o.model_defaults.empty())
    lines.push_back(fmt::format("Language-model defaults for flags not passed: {}",
                                join(o.model_defaults, ", ")));
  if (!o.init_weights.empty()) lines.push_back("Initial weights: " + o.init_weights);
  if (tp_) {
    // Under --pp the bytes are the TP x PP line's (a stage holds part of the model).
    const std::string bytes =
        pipe_ ? ""
              : fmt::format("; parameter bytes per rank {} of the model's {} ({:.1f}%)",
                            tp_bytes_.first, tp_bytes_.second,
                            100.0 * static_cast<double>(tp_bytes_.first) /
                                static_cast<double>(std::max<int64_t>(1, tp_bytes_.second)));
    lines.push_back(fmt::format(
        "Tensor parallel: {} ranks per model replica (sequence parallel {}), data parallel {}{}",
        tp_->group().size(), tp_->sequence_parallel ? "on" : "off", env_.dist.data_world_size,
        bytes));
  }
  if (pipe_) lines.push_back(pipeline_line());
  if (pipe_ && tp_) {
    const double model_bytes = static_cast<double>(c.num_parameters()) *
                               static_cast<double>(c10::elementSize(stage_->dtype()));
    lines.push_back(fmt::format(
        "Tensor x pipeline parallel: {} x {} ranks per model replica; parameter bytes per rank: "
        "largest {:.0f}, {:.1f}% of the one-process model's {:.0f}",
        tp_->group().size(), stage_->shape().stages, rank_bytes_max_,
        100 * rank_bytes_max_ / std::max(1.0, model_bytes), model_bytes));
  }
  lines.push_back(fmt::format("Device: {}, Threads: {}, Precision: {}, World size: {}, Backend: {}",
                              env_.device.str(), env_.threads, o.precision, env_.dist.world_size,
                              env_.dist.backend()));
  // Autocast's products (and so the attention's inputs) are in the autocast dtype.
  const auto products = env_.precision == Precision::kBf16   ? torch::kBFloat16
                        : env_.precision == Precision::kFp16 ? torch::kHalf
                                                             : env_.compute_dtype;
  lines.push_back(fmt::format("Attention: {}; activation checkpointing {}",
                              attention_path(env_.device, products, o.attention == "gpulab"),
                              o.activation_checkpointing ? "on" : "off"));
  lines.push_back(fmt::format(
      "FLOPs per token: {:.4g} (6N + attention); peak for MFU: {}", flops_per_token_,
      peak_.flops > 0 ? fmt::format("{:.2f} TFLOPS, {}", peak_.flops / 1e12, peak_.source)
                      : std::string("unknown for this device (MFU shows 0)")));
  if (o.precision == "bf16" && env_.device.is_cpu() && cpu_bf16_gemm_is_slow())
    lines.push_back(
        "bf16 matrix products: fp32 GEMM on bf16 operands, bf16 results (this CPU has no bf16 "
        "GEMM kernels; libtorch's fallback loop is ~15x slower)");
  return lines;
}

// The schedule and every stage's measured parameter memory (the model's share each holds).
std::string LmTask::pipeline_line() const {
  const parallel::PipelineShape& s = stage_->shape();
  std::vector<std::string> stages;
  double total = 0;
  for (double b : stage_bytes_) total += b;
  for (double b : stage_bytes_)
    stages.push_back(fmt::format("{:.0f} ({:.1f}%)", b, 100 * b / std::max(1.0, total)));
  return fmt::format(
      "Pipeline parallel: {} stages, {} schedule{}, {} micro-batches of {} sequences, data "
      "parallel {}; parameter bytes per stage: {}",
      s.stages, s.virtual_stages > 1 ? "interleaved 1F1B" : "1F1B",
      s.virtual_stages > 1 ? fmt::format(" ({} model chunks per stage)", s.virtual_stages) : "",
      s.micro_batches, env_.batch_per_process / s.micro_batches, env_.dist.data_world_size,
      join(stages, ", "));
}

// A Hugging Face folder: transformers' from_pretrained and `gpulab generate` read the run.
std::vector<std::string> LmTask::write_weights(Classifier& /*model*/, TensorStream& state,
                                               const std::filesystem::path& dir) const {
  const auto weights =
      write_hf_folder(dir, model_->config(), state, data_->tokenizer_spec(), "gpulab train",
                      parse_shard_size(env_.opts.max_shard_size).value_or_throw());
  return {"Weights: " + weights.string(), "Config: " + (dir / "config.json").string()};
}

std::string LmTask::input_fact() const {
  return fmt::format("{} tokens", env_.opts.seq_len);
}

}  // namespace gpulab::train
