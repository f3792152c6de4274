// The table of `gpulab train`'s options, one row a flag: the seed's ddp-training.py flags
// first, then gpulab's.
#include "train/train_option_rows.h"

#include <limits>

namespace gpulab::train {

namespace {

using TO = TrainOptions;
constexpr double kRowsInf = std::numeric_limits<double>::infinity();
constexpr FlagRange rows_at_least(double lo) {
  return {lo, kRowsInf};
}
constexpr FlagRange rows_above(double lo) {
  return {lo, kRowsInf, true};
}
constexpr FlagRange kRowsFraction{0, 1, false, true};  // [0, 1)

// clang-format off
const std::vector<TrainOptionRow> kTrainOptionRows = {
    // The seed's flags.
    {"model", &TO::model, "model name (see `gpulab models`)"},
    {"learning_rate", &TO::learning_rate, "base learning rate (language models: 3e-3 up to 512 wide, 6e-4 up to 1024, else 3e-4)", nullptr, rows_above(0)},
    {"optimizer", &TO::optimizer, "sgd, adam, adamw or rmsprop (language models: adamw, cosine schedule with 5% warm-up, clip_grad 1.0, weight_decay 0.1 unless passed)", optimizer_names},
    {"batch_size", &TO::batch_size, "samples (images or sequences) per process; with --batch_size_scaled, the global batch split between processes", nullptr, rows_at_least(1), true, "batch-size"},
    {"batch_size_scaled", &TO::batch_size_scaled, "treat --batch_size as the global batch, split between processes"},
    {"num_epochs", &TO::num_epochs, "epochs to train", nullptr, rows_at_least(1)},
    {"normalize", &TO::normalize, "imagenet, neg_one_one or zero_one", normalize_names},
    {"dataset", &TO::dataset, "cifar10, cifar100, mnist, fashion-mnist, imagefolder, synthetic; text or synthetic-text for language models"},
    {"log_every", &TO::log_every, "evaluate on the test set every N epochs", nullptr, rows_at_least(1)},
    {"weight_decay", &TO::weight_decay, "weight decay (not applied to norms and biases)", nullptr, rows_at_least(0)},
    {"show_recommendations", &TO::show_recommendations, "print model recommendations and exit"},
    {"script_options", &TO::script_options, "print example command lines and exit"},
    // Data and outputs.
    {"data_dir", &TO::data_dir, "folder with the data sets"},
    {"output_dir", &TO::output_dir, "run folder (default runs/<model>-<dataset>; --task grpo: runs/grpo-<prompts stem>)", nullptr, {}, false},
    {"init_weights", &TO::init_weights, "start from these weights (safetensors, Hugging Face / torchvision names) instead of a random initialization", nullptr, {}, false},
    {"input_size", &TO::input_size, "side of the square model input", nullptr, FlagRange{8, 4096}},
    {"augment", &TO::augment, "random crop and horizontal flip for training"},
    {"seq_len", &TO::seq_len, "tokens per training window (language models; bench train's images_per_second counts sequences)", nullptr, rows_at_least(1)},
    {"activation_checkpointing", &TO::activation_checkpointing, "recompute each transformer block in the backward pass (less memory)"},
    {"attention", &TO::attention, "language models: auto (on the CPU gpulab's batched products and softmax passes, sdpa past 16 MiB of probabilities a layer and on a GPU), sdpa (at::scaled_dot_product_attention everywhere, as on a GPU) or gpulab (gpulab's fused rotary CPU kernel in fp32/fp64, for A/B timings)", attention_names},
    {"num_workers", &TO::num_workers, "data loader threads (-1: auto)"},
    {"device", &TO::device, "auto, cpu, cuda or cuda:N"},
    {"cpu_kernels", &TO::cpu_kernels, "on: gpulab's CPU kernels where they apply (RMSNorm, SwiGLU, attention, float32 products, convolutions that are products); off: libtorch's ops (A/B timings)", on_off_names},
    {"tp", &TO::tp, "tensor-parallel ranks per model replica (language models: llama, qwen2, gpt2; with --pp, inside each stage: llama, qwen2); data parallel over world / (tp x pp)", nullptr, rows_at_least(1)},
    {"sequence_parallel", &TO::sequence_parallel, "with --tp: norms and residuals hold 1/tp of the sequence (on) or all of it (off)", on_off_names},
    {"allow_tp_across_nodes", &TO::allow_tp_across_nodes, "let a tensor-parallel group span nodes (slow: every layer all-reduces over the network)"},
    {"pp", &TO::pp, "pipeline stages per model replica (language models: llama, qwen2, gpt2); data parallel over world / pp (`gpulab plan`: plan only this number)", nullptr, rows_at_least(1)},
    {"pp_schedule", &TO::pp_schedule, "with --pp: 1f1b (warm-up, one forward one backward, cool-down) or interleaved (--pp_virtual_stages model chunks per stage, a smaller bubble)", pp_schedule_names},
    {"pp_virtual_stages", &TO::pp_virtual_stages, "with --pp_schedule interleaved: model chunks per stage", nullptr, rows_at_least(2)},
    {"pp_micro_batches", &TO::pp_micro_batches, "with --pp: micro-batches per step, dividing the batch (0: the most up to 2 x pp; interleaved: a multiple of pp)", nullptr, rows_at_least(0)},
    {"threads", &TO::threads, "intra-op threads (0: all cores / local ranks)", nullptr, rows_at_least(0)},
    {"resume", &TO::resume, "auto (newest complete checkpoint) or a checkpoint path", nullptr, {}, false},
    {"keep_checkpoints", &TO::keep_checkpoints, "complete checkpoints to keep", nullptr, rows_at_least(1)},
    {"no_checkpoints", &TO::no_checkpoints, "write no checkpoints"},
    {"no_report", &TO::no_report, "write no HTML report"},
    {"max_shard_size", &TO::max_shard_size, "final weights larger than this are written as Hugging Face's shards (model-00001-of-0000N.safetensors) with model.safetensors.index.json; sizes as transformers' max_shard_size: 50GB, 500MB, 2GiB"},
    // Optimization.
    {"momentum", &TO::momentum, "momentum (sgd, rmsprop)", nullptr, kRowsFraction},
    {"nesterov", &TO::nesterov, "Nesterov momentum (sgd)"},
    {"lr_schedule", &TO::lr_schedule, "none, step or cosine", schedule_names},
    {"warmup_epochs", &TO::warmup_epochs, "linear warmup, per step (fractions allowed)", nullptr, rows_at_least(0)},
    {"step_size", &TO::step_size, "epochs between decays (step schedule)", nullptr, rows_at_least(1)},
    {"gamma", &TO::gamma, "decay factor (step schedule)", nullptr, FlagRange{0, 1, true}},
    {"label_smoothing", &TO::label_smoothing, "label smoothing in [0, 1)", nullptr, kRowsFraction},
    {"clip_grad", &TO::clip_grad, "clip the global gradient norm (0: off)", nullptr, rows_at_least(0)},
    {"grad_accum", &TO::grad_accum, "micro-batches per optimizer step", nullptr, rows_at_least(1)},
    {"precision", &TO::precision, "fp32, tf32, bf16, fp16 (GPU only) or fp64 (a numerics check: model, inputs and loss in float64)", precision_names},
    {"channels_last", &TO::channels_last, "channels-last memory format (same as --memory_format channels_last)"},
    {"memory_format", &TO::memory_format, "auto (channels-last where measured faster: ResNet and MobileNet in fp32 on the CPU), channels_last or contiguous", memory_format_names},
    {"seed", &TO::seed, "random seed (the same seed, the same weights, data order and samples)"},
    {"deterministic", &TO::deterministic, "deterministic algorithms only"},
    // Small runs.
    {"subset", &TO::subset, "use only the first N train and test images (0: all)", nullptr, rows_at_least(0)},
    {"limit_train_batches", &TO::limit_train_batches, "batches per epoch (0: all)", nullptr, rows_at_least(0), false},
    {"limit_eval_batches", &TO::limit_eval_batches, "test batches (0: all)", nullptr, rows_at_least(0), false},
    {"max_steps", &TO::max_steps, "stop after N optimizer steps (0: no limit)", nullptr, rows_at_least(0), false},
    // GRPO (--task grpo, docs/rl.md).
    {"task", &TO::task, "auto (image classification or language modelling, by --model) or grpo (reinforcement fine-tuning of a language model on rewards, docs/rl.md)", task_names},
    {"weights", &TO::weights, "grpo: the policy, a Hugging Face folder (config.json + safetensors) or a gpulab run folder or checkpoint", nullptr, {}, false},
    {"tokenizer", &TO::tokenizer, "grpo: bytes, a SentencePiece .model or a tokenizer.json (or its folder); default: the weights' own, else bytes", nullptr, {}, false},
    {"prompts", &TO::prompts, "grpo: JSONL prompts, one object a line: `prompt` (text or chat messages) plus the fields rewards read", nullptr, {}, false},
    {"chat_format", &TO::chat_format, "grpo: chatml or llama3 for chat-message prompts (default: the tokenizer's special tokens say)", nullptr, {}, false},
    {"group_size", &TO::group_size, "grpo: completions sampled per prompt (G; at least 2)"},
    {"generation_gpus", &TO::generation_gpus, "grpo: how many of the --nproc_per_node ranks only generate, on the first that many GPUs (1: GPU 0, as the seed's vLLM server); the rest train and send them the weights after each optimizer step (0: every rank generates its own)", nullptr, rows_at_least(0)},
    {"generation_gpu_ids", &TO::generation_gpu_ids, "grpo: which GPUs of the first node generate, as local indices (7, or 6,7): the ranks of those local ranks generate and the others train on the other GPUs; sets --generation_gpus to their count (default: the first --generation_gpus GPUs)"},
    {"overlap_generation", &TO::overlap_generation, "grpo with --generation_gpus: the generation ranks sample the next step's rollouts while the training ranks train on this step's, so neither waits for the other; each rollout is then one policy step older (the step record's policy_step says which; as verl's one-step off-policy)"},
    {"importance_sampling", &TO::importance_sampling, "grpo: weight each token's loss by pi_old / pi_sampler, the policy the step starts from over the one that sampled (TRL's vllm_importance_sampling_mode): per token or sequence, truncated to or masked outside [--importance_sampling_min, --importance_sampling_max]; auto: sequence_mask with --overlap_generation (its rollouts are a step old), else off", importance_sampling_names},
    {"importance_sampling_min", &TO::importance_sampling_min, "grpo: the importance weights' lower bound (0: none)", nullptr, rows_at_least(0)},
    {"importance_sampling_max", &TO::importance_sampling_max, "grpo: the importance weights' upper bound (TRL: 3)", nullptr, rows_above(0)},
    {"temperature", &TO::temperature, "grpo: sampling temperature (0: greedy)", nullptr, rows_at_least(0)},
    {"top_p", &TO::top_p, "grpo: nucleus sampling mass (1: off)", nullptr, FlagRange{0, 1, true}},
    {"top_k", &TO::top_k, "grpo: sample among the k likeliest tokens (0: all)", nullptr, rows_at_least(0)},
    {"max_new_tokens", &TO::max_new_tokens, "grpo: completion tokens at most (a row stops earlier at the tokenizer's EOS)", nullptr, rows_at_least(1)},
    {"loss_type", &TO::loss_type, "grpo: grpo (per-sequence mean), dapo (token-level) or dr_grpo (no length or std normalisation)", grpo_loss_names},
    {"epsilon", &TO::epsilon, "grpo: clip the policy ratio below at 1 - epsilon (and above at 1 + epsilon)", nullptr, kRowsFraction},
    {"epsilon_high", &TO::epsilon_high, "grpo: clip above at 1 + epsilon_high instead (DAPO: 0.28; 0: --epsilon)", nullptr, rows_at_least(0)},
    {"beta", &TO::beta, "grpo: KL weight against a frozen copy of the initial policy (DeepSeekMath 0.04; 0: no reference)", nullptr, rows_at_least(0)},
    {"mu", &TO::mu, "grpo: optimizer steps on each batch of rollouts (> 1: the ratio against the sampling policy's log-probabilities)", nullptr, rows_at_least(1)},
    {"dynamic_sampling", &TO::dynamic_sampling, "grpo: drop groups whose completions all got the same reward (DAPO)"},
    {"reward", &TO::reward, "grpo: reward spec, a sum of [WEIGHT*]NAME terms with NAME answer, regex or command (e.g. \"answer+0.2*regex\")", nullptr, {}},
    {"reward_regex", &TO::reward_regex, "grpo: the regex reward's pattern (PCRE2), e.g. \"^<think>.*?</think><answer>.*?</answer>$\"", nullptr, {}, false},
    {"reward_command", &TO::reward_command, "grpo: the command reward's program and arguments (no shell): JSONL of prompt/completion/fields on stdin, one number a line on stdout", nullptr, {}, false},
    {"reward_timeout", &TO::reward_timeout, "grpo: seconds the reward command may take per batch", nullptr, rows_above(0)},
    {"reward_failure", &TO::reward_failure, "grpo: a reward that fails (a command that crashes, hangs or prints garbage): stop the run, or score it 0 (counted)", reward_failure_names},
    {"answer_field", &TO::answer_field, "grpo: the prompt field the answer reward compares with"},
    {"answer_extract", &TO::answer_extract, "grpo: the answer in a completion: last_number, answer_tag (<answer>...</answer>), boxed (\\boxed{...}) or whole", answer_extract_names},
    {"answer_match", &TO::answer_match, "grpo: exact (text) or numeric (within --answer_tolerance)", answer_match_names},
    {"answer_tolerance", &TO::answer_tolerance, "grpo: numeric answers match within this", nullptr, rows_at_least(0)},
};
// clang-format on

}  // namespace

const std::vector<std::string>& pp_schedule_names() {
  static const std::vector<std::string> names = {"1f1b", "interleaved"};
  return names;
}

const std::vector<std::string>& on_off_names() {
  static const std::vector<std::string> names = {"on", "off"};
  return names;
}

const std::vector<TrainOptionRow>& train_option_rows() {
  return kTrainOptionRows;
}

const TrainOptionRow& train_option_row(const std::string& name) {
  return find_option_row(kTrainOptionRows, name);
}

Status check_option_rows(const TrainOptions& o) {
  return gpulab::check_option_rows(o, kTrainOptionRows);
}

}  // namespace gpulab::train
