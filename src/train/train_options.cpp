// Validation of `gpulab train` options (values, then model, data and world size: the one home of
// every option check) and the seed's example command lines.
#include "train/train_options.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "core/strings.h"
#include "train/device.h"
#include "train/lm_batches.h"
#include "train/models/decoder_config.h"
#include "train/models/registry.h"
#include "train/rl/grpo_importance.h"
#include "train/weights/hf_shards.h"

namespace gpulab::train {

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd", "adam", "adamw", "rmsprop"};
  return names;
}
const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"none", "step", "cosine"};
  return names;
}
const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32", "tf32", "bf16", "fp16", "fp64"};
  return names;
}
const std::vector<std::string>& normalize_names() {
  static const std::vector<std::string> names = {"imagenet", "neg_one_one", "zero_one"};
  return names;
}
const std::vector<std::string>& memory_format_names() {
  static const std::vector<std::string> names = {"auto", "channels_last", "contiguous"};
  return names;
}
const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"auto", "grpo"};
  return names;
}
const std::vector<std::string>& grpo_loss_names() {
  static const std::vector<std::string> names = {"grpo", "dapo", "dr_grpo"};
  return names;
}
const std::vector<std::string>& importance_sampling_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{"auto"};
    for (const auto& m : rl::importance_mode_names()) n.push_back(m);
    return n;
  }();
  return names;
}
const std::vector<std::string>& reward_failure_names() {
  static const std::vector<std::string> names = {"stop", "zero"};
  return names;
}
const std::vector<std::string>& answer_extract_names() {
  static const std::vector<std::string> names = {"last_number", "answer_tag", "boxed", "whole"};
  return names;
}
const std::vector<std::string>& answer_match_names() {
  static const std::vector<std::string> names = {"exact", "numeric"};
  return names;
}
const std::vector<std::string>& attention_names() {
  static const std::vector<std::string> names = {"auto", "sdpa", "gpulab"};
  return names;
}

std::string effective_output_dir(const TrainOptions& opts) {
  if (!opts.output_dir.empty()) return opts.output_dir;
  // GRPO reads no --dataset, and its policy may come from --weights: named by its prompts.
  if (opts.task == "grpo")
    return "runs/grpo-" + std::filesystem::path(opts.prompts).stem().string();
  return "runs/" + opts.model + "-" + opts.dataset;
}

namespace {

Status bad(std::string message, std::string hint = {}) {
  return Error{Code::kInvalidArgument, std::move(message), std::move(hint)};
}

}  // namespace

Status validate(const TrainOptions& o) {
  if (auto st = check_option_rows(o); !st) return st;
  if (o.channels_last && o.memory_format == "contiguous")
    return bad("--channels_last and --memory_format contiguous contradict each other",
               "pass one of them");
  if (!valid_device_name(o.device))
    return bad("--device '" + o.device + "' is not valid", "valid values: auto, cpu, cuda, cuda:N");
  if (o.nesterov && o.optimizer == "sgd" && o.momentum == 0)
    return bad("--nesterov needs --momentum > 0");
  if (auto size = parse_shard_size(o.max_shard_size); !size)
    return bad("--max_shard_size " + size.error().message, size.error().hint);

  // Precision depends on the device: libtorch's CPU autocast knows bf16 only.
  const bool cpu = o.device == "cpu" || (o.device == "auto" && !torch::cuda::is_available());
  if (o.precision == "fp16" && cpu)
    return bad(
        "--precision fp16 is not supported on the CPU (libtorch's CPU autocast runs bf16 only)",
        "use --precision bf16 on the CPU, or fp16 on a CUDA/ROCm device");
  return check_gpu_build(o.device);
}

namespace {

// A language model trains on token data, an image model on images; the sequence fits the model.
Status check_language_model(const TrainOptions& o) {
  if (!is_language_model(o.model))
    return bad("--dataset " + o.dataset + " trains a language model, not " + o.model,
               "pass one of " + shapes_taking_data_vocab() + " (see `gpulab models`)");
  if (!is_text_dataset(o.dataset))
    return bad(
        "--model " + o.model + " is a language model; --dataset " + o.dataset + " holds images",
        "pass --dataset text --data_dir DIR (from `gpulab data tokenize`)");
  auto cfg = find_decoder_config(o.model);
  if (!cfg) return cfg.error();
  if (o.seq_len > cfg->max_positions)
    return bad(fmt::format("--seq_len {} is beyond {}'s {} positions", o.seq_len, cfg->name,
                           cfg->max_positions),
               fmt::format("pass --seq_len {} or less", cfg->max_positions));
  return ok_status();
}

// The model is in the table, and a name with a fixed input size gets that size.
Status check_image_model(const TrainOptions& o) {
  int64_t alias_size = 0;
  if (auto info = find_model(o.model, &alias_size); !info) return info.error();
  if (alias_size > 0 && alias_size != o.input_size)
    return bad(fmt::format("--model {} is built for {}x{} inputs, but --input_size is {}", o.model,
                           alias_size, alias_size, o.input_size),
               fmt::format("pass --input_size {} or use a model without a fixed size", alias_size));
  return ok_status();
}

}  // namespace

std::string shapes_taking_data_vocab() {
  std::vector<std::string> names;
  for (const auto& c : decoder_shapes())
    if (c.vocab_from_data) names.push_back(c.name);
  return join(names, ", ");
}

int64_t batch_per_process(const TrainOptions& o, int world_size) {
  return o.batch_size_scaled ? o.batch_size / std::max(1, world_size) : o.batch_size;
}

Status check_train_options(const TrainOptions& o, int world_size) {
  if (auto st = validate(o); !st) return st;
  // GRPO reads no --model/--dataset pair: its policy, prompts and rewards are the task's own
  // checks (check_task_options, train/tasks/task_table.h).
  if (o.task == "grpo") return ok_status();
  const bool lm = is_language_model(o.model) || is_text_dataset(o.dataset);
  if (auto st = lm ? check_language_model(o) : check_image_model(o); !st) return st;
  // What the world size decides, for every model kind: each process takes at least one sample.
  // (Tensor-parallel ranks share their group's batch: the data-parallel ranks split it.)
  const int64_t readers = world_size / (o.tp * o.pp);
  if (o.batch_size_scaled && o.batch_size < readers)
    return bad(fmt::format("--batch_size {} with --batch_size_scaled is smaller than the {} "
                           "processes: it must be >= {}, one sample or more for each",
                           o.batch_size, readers, readers),
               fmt::format("pass --batch_size {} or more, or drop --batch_size_scaled", readers));
  return ok_status();
}

// The ranks check what they build as well (sharded_model.cpp).
Status check_shard_world(const TrainOptions& o, const std::string& shard, int world_size) {
  if (shard == "none" || o.tp * o.pp != 1 || world_size < 2 || !is_language_model(o.model))
    return ok_status();
  auto cfg = find_decoder_config(o.model);
  if (!cfg || cfg->num_parameters() >= world_size) return ok_status();
  return bad(fmt::format("--shard {}: {} has {} parameters, fewer than the {} processes, so some "
                         "process would hold no shard",
                         shard, cfg->name, cfg->num_parameters(), world_size),
             fmt::format("use {} processes or fewer, or --shard none", cfg->num_parameters()));
}

Json options_to_json(const TrainOptions& o) {
  Json j{{"model", o.model},
         {"dataset", o.dataset},
         {"data_dir", o.data_dir},
         {"output_dir", effective_output_dir(o)},
         {"init_weights", o.init_weights},
         {"input_size", o.input_size},
         {"normalize", o.normalize},
         {"augment", o.augment},
         {"optimizer", o.optimizer},
         {"learning_rate", o.learning_rate},
         {"weight_decay", o.weight_decay},
         {"momentum", o.momentum},
         {"nesterov", o.nesterov},
         {"lr_schedule", o.lr_schedule},
         {"warmup_epochs", o.warmup_epochs},
         {"step_size", o.step_size},
         {"gamma", o.gamma},
         {"label_smoothing", o.label_smoothing},
         {"clip_grad", o.clip_grad},
         {"grad_accum", o.grad_accum},
         {"seq_len", o.seq_len},
         {"activation_checkpointing", o.activation_checkpointing},
         {"attention", o.attention},
         {"cpu_kernels", o.cpu_kernels},
         {"batch_size", o.batch_size},
         {"batch_size_scaled", o.batch_size_scaled},
         {"num_epochs", o.num_epochs},
         {"log_every", o.log_every},
         {"precision", o.precision},
         {"channels_last", o.channels_last},
         {"memory_format", o.memory_format},
         {"seed", o.seed},
         {"deterministic", o.deterministic},
         {"device", o.device},
         {"subset", o.subset},
         {"limit_train_batches", o.limit_train_batches},
         {"limit_eval_batches", o.limit_eval_batches},
         {"max_steps", o.max_steps},
         {"tp", o.tp},
         {"sequence_parallel", o.sequence_parallel},
         {"pp", o.pp},
         {"pp_schedule", o.pp_schedule},
         {"pp_micro_batches", o.pp_micro_batches}};
  if (o.task != "grpo") return j;
  j["task"] = o.task;
  j["weights"] = o.weights;
  j["tokenizer"] = o.tokenizer;
  j["prompts"] = o.prompts;
  j["chat_format"] = o.chat_format;
  j["group_size"] = o.group_size;
  j["temperature"] = o.temperature;
  j["top_p"] = o.top_p;
  j["top_k"] = o.top_k;
  j["max_new_tokens"] = o.max_new_tokens;
  j["loss_type"] = o.loss_type;
  j["epsilon"] = o.epsilon;
  j["epsilon_high"] = o.epsilon_high;
  j["beta"] = o.beta;
  j["mu"] = o.mu;
  j["dynamic_sampling"] = o.dynamic_sampling;
  j["generation_gpus"] = o.generation_gpus;
  j["generation_gpu_ids"] = o.generation_gpu_ids;
  j["overlap_generation"] = o.overlap_generation;
  j["importance_sampling"] = o.importance_sampling;
  j["importance_sampling_min"] = o.importance_sampling_min;
  j["importance_sampling_max"] = o.importance_sampling_max;
  j["reward"] = o.reward;
  j["reward_regex"] = o.reward_regex;
  j["reward_command"] = o.reward_command;
  j["reward_timeout"] = o.reward_timeout;
  j["reward_failure"] = o.reward_failure;
  j["answer_field"] = o.answer_field;
  j["answer_extract"] = o.answer_extract;
  j["answer_match"] = o.answer_match;
  j["answer_tolerance"] = o.answer_tolerance;
  return j;
}

std::string script_options_text() {
  // The seed's examples, plus the Fashion-MNIST run that works on any machine.
  return R"(Training script options (examples):

Quick testing:
  --model resnet18 --learning_rate 0.001 --optimizer sgd --batch_size 256 --num_epochs 10

Best performance:
  --model resnet101 --learning_rate 0.002 --optimizer sgd --batch_size 1024 --num_epochs 100 --normalize neg_one_one

Scaled batch size (global batch stays the same on any number of GPUs):
  --model resnet101 --learning_rate 0.002 --optimizer sgd --batch_size 1024 --batch_size_scaled --num_epochs 100

Large models:
  --model efficientnet_b0 --learning_rate 0.001 --optimizer adamw --batch_size 256 --weight_decay 1e-5

Vision transformers:
  --model vit_base_patch16_224 --learning_rate 0.0001 --optimizer adamw --batch_size 128 --weight_decay 0.05

CIFAR-10:
  --model resnet18 --learning_rate 0.001 --optimizer sgd --dataset cifar10 --batch_size 256 --num_epochs 20

Fashion-MNIST on a CPU (data set found automatically; >= 90% test accuracy in 3 epochs):
  --model resnet18 --dataset fashion-mnist --input_size 32 --learning_rate 0.1 --optimizer sgd --nesterov --lr_schedule cosine --warmup_epochs 0.3 --batch_size 128 --num_epochs 3 --channels_last

Mixed precision, gradient accumulation, clipping, resume:
  --precision bf16 --grad_accum 4 --clip_grad 1.0 --resume auto
)";
}

}  // namespace gpulab::train
