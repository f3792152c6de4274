// The options of `gpulab train` in one struct (the seed's ddp-training.py flags plus gpulab's),
// the lists of valid values, and the cross-field validation that runs before any work starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/result.h"

namespace gpulab::train {

struct TrainOptions {
  // What to train, on what. Flag names and defaults follow the seed's ddp-training.py.
  std::string model = "resnet18";
  std::string dataset = "cifar100";
  std::string data_dir = "data";
  std::string output_dir;  // empty: runs/<model>-<dataset>
  // Starting weights (safetensors under the model's public names) instead of a random
  // initialization: fine-tuning a published checkpoint, or two trainers from the same start.
  std::string init_weights;
  int64_t input_size = 224;
  std::string normalize = "imagenet";
  bool augment = false;  // random crop + flip (off by default: short runs converge faster)
  // Language models (--dataset text / synthetic-text): tokens per training window, and
  // recomputing each block in the backward pass instead of keeping its activations.
  int64_t seq_len = 256;
  bool activation_checkpointing = false;
  // auto: gpulab's batched attention on the CPU where it applies (ops/batched_attention.h), sdpa
  // elsewhere; sdpa: at::scaled_dot_product_attention on every device (what a GPU runs); gpulab:
  // gpulab's fused rotary CPU kernel where it applies (A/B timings against sdpa, bench/compare).
  std::string attention = "auto";
  // on: gpulab's CPU kernels where they apply (train/ops/cpu_kernels.h); off: libtorch's ops
  // everywhere (A/B timings against what a GPU host runs).
  std::string cpu_kernels = "on";

  // Optimization.
  std::string optimizer = "sgd";
  double learning_rate = 0.001;
  double weight_decay = 1e-4;
  double momentum = 0.9;
  bool nesterov = false;
  std::string lr_schedule = "none";
  double warmup_epochs = 0;
  int64_t step_size = 30;  // epochs between decays for --lr_schedule step
  double gamma = 0.1;      // decay factor for --lr_schedule step
  double label_smoothing = 0;
  double clip_grad = 0;  // max global gradient norm; 0 = off
  int64_t grad_accum = 1;
  // Model-kind defaults that replaced the flags' own ("optimizer adamw", ...), for the header
  // line (train/model_defaults.h); empty when every flag was passed or for an image model.
  std::vector<std::string> model_defaults;

  // Batches and epochs. With batch_size_scaled, batch_size is the global batch (split by ranks).
  int64_t batch_size = 128;
  bool batch_size_scaled = false;
  int64_t num_epochs = 10;
  int64_t log_every = 1;  // evaluate on the test set every N epochs (and after the last)

  // Execution.
  std::string precision = "fp32";
  bool channels_last = false;          // --channels_last: same as memory_format channels_last
  std::string memory_format = "auto";  // auto | channels_last | contiguous (train/memory_format.h)
  int64_t seed = 0;
  bool deterministic = false;
  std::string device = "auto";
  int64_t num_workers = -1;  // -1: auto
  int64_t threads = 0;       // intra-op threads; 0: all cores (split between local ranks)

  // Model parallelism (docs/parallelism.md): tensor-parallel ranks per model replica (language
  // models of a family with a tensor-parallel model), sequence parallelism inside them (on|off),
  // and whether a TP group may span nodes. Pipeline stages (language models), their schedule
  // (1f1b | interleaved), model chunks per stage of the interleaved one, and micro-batches per
  // step (0: the largest count up to 2·pp that divides the batch).
  int64_t tp = 1;
  std::string sequence_parallel = "on";
  bool allow_tp_across_nodes = false;
  int64_t pp = 1;
  std::string pp_schedule = "1f1b";
  int64_t pp_virtual_stages = 2;
  int64_t pp_micro_batches = 0;

  // Checkpoints and outputs.
  std::string resume;  // "", "auto" or a checkpoint path
  int64_t keep_checkpoints = 2;
  bool no_checkpoints = false;
  bool no_report = false;
  bool no_weights = false;  // no model.safetensors at the end (bench train: a scratch run)
  // Final weights larger than this are written as Hugging Face's shards with an index
  // (weights/hf_shards.h); the default is transformers' save_pretrained's.
  std::string max_shard_size = "50GB";

  // Small runs for tests and demos.
  int64_t subset = 0;               // use only the first N training and N test images
  int64_t limit_train_batches = 0;  // stop each epoch after N batches
  int64_t limit_eval_batches = 0;
  int64_t max_steps = 0;  // stop the run after N optimizer steps (0: no limit); no checkpoint

  // The kind of training: "auto" (an image classifier or a language model, by --model) or "grpo"
  // (reinforcement fine-tuning of a language model on rewards: train/tasks/grpo_task.h).
  std::string task = "auto";
  // GRPO (docs/rl.md). The policy: a Hugging Face folder or a gpulab run (--weights), else
  // --model with --init_weights; its tokenizer (empty: the weights' own, else bytes).
  std::string weights;
  std::string tokenizer;
  std::string prompts;      // JSONL, one prompt a line (train/rl/prompt_set.h)
  std::string chat_format;  // chat prompts: chatml or llama3 (empty: the tokenizer's)
  int64_t group_size = 8;   // completions per prompt (G)
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t max_new_tokens = 64;
  std::string loss_type = "dapo";       // grpo, dapo, dr_grpo (train/rl/grpo_loss.h)
  double epsilon = 0.2;                 // the ratio's clip below (and above unless epsilon_high)
  double epsilon_high = 0;              // 0: --epsilon; DAPO's clip-higher: 0.28
  double beta = 0;                      // KL weight against a frozen reference copy
  int64_t mu = 1;                       // optimizer steps on each rollout batch
  bool dynamic_sampling = false;        // drop groups whose rewards are all equal
  std::string reward = "answer";        // reward spec (train/rl/reward_spec.h)
  std::string reward_regex;             // the pattern of the `regex` reward
  std::string reward_command;           // the program (and arguments) of the `command` reward
  double reward_timeout = 60;           // seconds per batch for the command
  std::string reward_failure = "stop";  // a failed score stops the run, or scores 0
  std::string answer_field = "answer";
  std::string answer_extract = "last_number";
  std::string answer_match = "numeric";
  double answer_tolerance = 1e-6;
  // Processes (and GPUs) that only generate, beside the training ones; 0: colocated.
  int64_t generation_gpus = 0;
  std::string generation_gpu_ids;  // which local GPUs of the first node generate: "7", "6,7"
  // With generation ranks: step k+1's rollouts are sampled while step k trains.
  bool overlap_generation = false;
  // Weights against the policy that sampled (train/rl/grpo_importance.h); auto: sequence_mask
  // when overlapped (its rollouts are a step old), else off.
  std::string importance_sampling = "auto";
  double importance_sampling_min = 0;  // C_min (0: none)
  double importance_sampling_max = 3;  // C_max (TRL's default)

  // Print-and-exit modes of the seed.
  bool show_recommendations = false;
  bool script_options = false;
};

// Valid values of the enumerated flags (printed in error messages and --help).
const std::vector<std::string>& optimizer_names();
const std::vector<std::string>& schedule_names();
const std::vector<std::string>& precision_names();
const std::vector<std::string>& normalize_names();
const std::vector<std::string>& memory_format_names();
const std::vector<std::string>& attention_names();
const std::vector<std::string>& on_off_names();       // --cpu_kernels
const std::vector<std::string>& pp_schedule_names();  // --pp_schedule
const std::vector<std::string>& task_names();         // --task
const std::vector<std::string>& grpo_loss_names();
const std::vector<std::string>& reward_failure_names();
const std::vector<std::string>& importance_sampling_names();  // auto + rl::ImportanceMode's
const std::vector<std::string>& answer_extract_names();
const std::vector<std::string>& answer_match_names();

// The run folder: output_dir, or runs/<model>-<dataset> when none was given (GRPO:
// runs/grpo-<prompts file's stem>).
std::string effective_output_dir(const TrainOptions& opts);

// The options as JSON (recorded in checkpoints and the metrics log).
Json options_to_json(const TrainOptions& opts);

// Each option row's check on the value it holds (train_option_rows.cpp, where the rows are):
// "--optimizer 'x' is not valid" with the valid names, "--momentum 1 is outside [0, 1)".
Status check_option_rows(const TrainOptions& o);

// Checks values and combinations that flags alone cannot (ranges, enum values, precision on a
// device). Fails with kInvalidArgument and a hint that lists the valid values.
Status validate(const TrainOptions& opts);

// Every check of a run's options, for every model kind, in one place: validate, then what needs
// the model table and the world size (the model and data kinds agree, the input or sequence
// length fits the model, the batch split between world_size processes). It needs no data and no
// peer, so a command runs it once per process, and before starting ranks: a bad combination
// gives one error, never N ranks that fail. A command calls check_task_options
// (train/tasks/task_table.h), which adds a task's own checks (GRPO's) to these.
Status check_train_options(const TrainOptions& opts, int world_size);

// ZeRO (`shard`, DistOptions' --shard) splits the model's elements over the data-parallel
// processes: a language model with fewer elements than the `world_size` processes would leave one
// without a shard. Judged in the launcher, before any rank starts, where the shape gives the count
// (no TP or PP; a config.json can describe a model that small).
Status check_shard_world(const TrainOptions& o, const std::string& shard, int world_size);

// The batch each process takes: --batch_size, or with --batch_size_scaled its share of that
// global batch (check_train_options refuses a global batch smaller than the processes).
int64_t batch_per_process(const TrainOptions& opts, int world_size);

// The named language models sized for the data's vocabulary (the ones a first run starts with),
// for hints.
std::string shapes_taking_data_vocab();

// The seed's --script_options text: example command lines for common jobs.
std::string script_options_text();

}  // namespace gpulab::train
