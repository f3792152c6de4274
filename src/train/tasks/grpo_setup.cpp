// GRPO's inputs and their checks (see grpo_setup.h).
#include "train/tasks/grpo_setup.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"
#include "train/data/chat_format.h"
#include "train/models/lm_families.h"
#include "train/rl/reward_spec.h"

namespace gpulab::train {

namespace {

Error grpo_error(std::string message, std::string hint) {
  return Error{Code::kInvalidArgument, std::move(message), std::move(hint)};
}

// The policy's shape: --model's when it names a language model, else the --weights' config.json
// or the run's recorded --model. Its weights are read later, by the task.
Status resolve_policy(const TrainOptions& o, GrpoInputs& in) {
  if (is_language_model(o.model)) in.model_arg = o.model;
  if (o.weights.empty()) {
    if (in.model_arg.empty())
      return grpo_error(
          "--task grpo needs a language-model policy; --model " + o.model + " is not one",
          "pass --weights DIR (a Hugging Face folder with config.json and "
          "safetensors, or a gpulab run), or --model SHAPE with --init_weights FILE");
    auto cfg = find_decoder_config(o.model);
    if (!cfg) return cfg.error();
    in.config = *cfg;
    return ok_status();
  }
  auto files = locate_model_files(o.weights);
  if (!files)
    return Error{files.error().code, "--weights " + files.error().message, files.error().hint};
  Result<DecoderConfig> cfg = grpo_error("", "");
  if (!in.model_arg.empty()) cfg = find_decoder_config(in.model_arg);
  if (!cfg && !files->config.empty()) cfg = find_decoder_config(files->config.string());
  if (!cfg && files->options.contains("model") && files->options["model"].is_string())
    cfg = find_decoder_config(files->options["model"].get<std::string>());
  if (!cfg)
    return grpo_error("--weights " + o.weights + " has no config.json and no record of its model",
                      "pass --model with its shape name or config.json");
  in.config = *cfg;
  in.weights = std::move(*files);
  return ok_status();
}

Status open_tokenizer_of(const TrainOptions& o, GrpoInputs& in) {
  in.tokenizer_spec = !o.tokenizer.empty() ? o.tokenizer
                      : in.weights         ? run_tokenizer_spec(*in.weights)
                                           : std::string();
  if (in.tokenizer_spec.empty()) in.tokenizer_spec = "bytes";
  auto tok = open_tokenizer(in.tokenizer_spec);
  if (!tok) return Error{tok.error().code, "--tokenizer " + tok.error().message, tok.error().hint};
  in.tokenizer = std::move(*tok);
  if (in.config.vocab_from_data) in.config.vocab_size = in.tokenizer->vocab_size();
  if (in.tokenizer->vocab_size() > in.config.vocab_size)
    return grpo_error(fmt::format("the tokenizer's vocabulary ({}) is larger than the model's ({})",
                                  in.tokenizer->vocab_size(), in.config.vocab_size),
                      "pass the --tokenizer the policy was trained with");
  return ok_status();
}

// Each prompt as the policy reads it; the longest with --max_new_tokens fits its positions.
Status tokenize_prompts(const TrainOptions& o, GrpoInputs& in) {
  std::optional<ChatFormat> format;
  if (!o.chat_format.empty()) {
    auto f = parse_chat_format(o.chat_format);
    if (!f) return Error{f.error().code, "--chat_format: " + f.error().message, f.error().hint};
    format = *f;
  } else if (auto f = detect_chat_format(*in.tokenizer)) {
    format = *f;
  }
  size_t longest = 0;
  for (const rl::Prompt& p : in.prompts.prompts) {
    auto text = rl::prompt_text(in.prompts, p, format);
    if (!text) return text.error();
    std::vector<int64_t> ids;
    if (in.tokenizer->prepends_bos()) ids.push_back(in.tokenizer->bos_id());
    for (int32_t id : in.tokenizer->encode(*text)) ids.push_back(id);
    if (ids.empty())
      return grpo_error(in.prompts.where(p) + ": the prompt encodes to no tokens",
                        "give every prompt some text");
    if (in.prompt_ids.empty() || ids.size() > in.prompt_ids[longest].size())
      longest = in.prompt_ids.size();
    in.prompt_ids.push_back(std::move(ids));
  }
  const auto& worst = in.prompt_ids[longest];
  const auto total = static_cast<int64_t>(worst.size()) + o.max_new_tokens;
  if (total > in.config.max_positions)
    return grpo_error(
        fmt::format("{}: the prompt ({} tokens) + --max_new_tokens {} exceed {}'s {} positions",
                    in.prompts.where(in.prompts.prompts[longest]), worst.size(), o.max_new_tokens,
                    in.config.name, in.config.max_positions),
        fmt::format(
            "lower --max_new_tokens to {} or shorten the prompt",
            std::max<int64_t>(0, in.config.max_positions - static_cast<int64_t>(worst.size()))));
  return ok_status();
}

Status make_reward(const TrainOptions& o, GrpoInputs& in) {
  rl::RewardSpecOptions r;
  r.spec = o.reward;
  r.answer.field = o.answer_field;
  auto extract = rl::parse_answer_extraction(o.answer_extract);
  if (!extract) return extract.error();
  r.answer.extraction = *extract;
  r.answer.match = o.answer_match == "exact" ? rl::AnswerMatch::kExact : rl::AnswerMatch::kNumeric;
  r.answer.tolerance = o.answer_tolerance;
  r.regex = o.reward_regex;
  auto argv = split_shell_words(o.reward_command);  // a quoted argument stays one word
  if (!argv)
    return grpo_error("--reward_command '" + o.reward_command + "' has an unclosed quote",
                      "close the quote");
  r.command.argv = std::move(*argv);
  r.command.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.reward_timeout * 1000));
  auto reward = rl::build_reward(r);
  if (!reward) return reward.error();
  if (auto st = (*reward)->check(in.prompts); !st) return st;
  in.reward = std::move(*reward);
  auto policy = rl::parse_reward_failure_policy(o.reward_failure);
  if (!policy) return policy.error();
  in.failure = *policy;
  return ok_status();
}

Status sampling_and_loss(const TrainOptions& o, GrpoInputs& in) {
  in.sampling.temperature = o.temperature;
  in.sampling.top_k = o.top_k;
  in.sampling.top_p = o.top_p;
  in.sampling.max_new_tokens = o.max_new_tokens;
  in.sampling.seed = static_cast<uint64_t>(o.seed);
  in.sampling.eos_id = in.tokenizer->eos_id();
  if (auto bad = check_sampler_settings(in.sampling)) return *bad;
  auto type = rl::parse_grpo_loss_type(o.loss_type);
  if (!type) return type.error();
  in.loss.type = *type;
  in.loss.epsilon_low = o.epsilon;
  in.loss.epsilon_high = o.epsilon_high > 0 ? o.epsilon_high : o.epsilon;
  in.loss.beta = o.beta;
  in.loss.max_completion_length = o.max_new_tokens;
  // auto: on where the rollouts are off-policy by design (a step old when overlapped).
  const std::string mode = o.importance_sampling != "auto" ? o.importance_sampling
                           : o.overlap_generation          ? "sequence_mask"
                                                           : "off";
  auto is_mode = rl::parse_importance_mode(mode);
  if (!is_mode) return is_mode.error();
  in.loss.importance = {*is_mode, o.importance_sampling_min, o.importance_sampling_max};
  in.sampling.record_log_probs = *is_mode != rl::ImportanceMode::kOff;
  return rl::check_grpo_loss_options(in.loss);
}

}  // namespace

Result<GrpoInputs> open_grpo_inputs(const TrainOptions& o) {
  if (o.prompts.empty())
    return grpo_error("--task grpo needs --prompts FILE.jsonl",
                      "one JSON object a line: {\"prompt\": \"...\", \"answer\": ...}");
  GrpoInputs in;
  if (auto st = resolve_policy(o, in); !st) return st.error();
  if (auto st = open_tokenizer_of(o, in); !st) return st.error();
  auto set = rl::read_prompt_set(o.prompts);
  if (!set) return Error{set.error().code, "--prompts " + set.error().message, set.error().hint};
  in.prompts = std::move(*set);
  if (auto st = tokenize_prompts(o, in); !st) return st.error();
  if (auto st = make_reward(o, in); !st) return st.error();
  if (auto st = sampling_and_loss(o, in); !st) return st.error();
  return in;
}

CausalLmPtr build_grpo_policy(GrpoInputs& in, const torch::Device& device) {
  if (!in.weights) return build_causal_lm(in.config, device);
  auto loaded = load_decoder(*in.weights, in.model_arg).value_or_throw();
  in.config = loaded.config;
  return build_loaded_decoder(loaded, device);
}

Status check_grpo_sharding(const TrainOptions& o, const std::string& shard) {
  // Generation ranks of their own (--generation_gpus): the training ranks only train.
  if (o.task != "grpo" || shard != "full" || o.generation_gpus > 0) return ok_status();
  return grpo_error(
      "--task grpo does not run with --shard full yet: its ranks generate different "
      "numbers of tokens, and each forward of a fully sharded model is a collective",
      "pass --shard gradients (ZeRO-2) or --shard optimizer (ZeRO-1), or generate on ranks of "
      "its own (--generation_gpus 1)");
}

Status check_grpo_options(const TrainOptions& o, int world_size) {
  if (o.group_size < 2)
    return grpo_error(fmt::format("--group_size {} leaves no advantage: GRPO compares each "
                                  "completion with the others of its prompt",
                                  o.group_size),
                      "pass --group_size 2 or more (DeepSeekMath and TRL use 8 or more)");
  if (o.mu > 1 && o.grad_accum > 1)
    return grpo_error("--mu with --grad_accum is not supported yet",
                      "pass --grad_accum 1 (raise --batch_size for a larger step)");
  if (batch_per_process(o, world_size) < 1)
    return grpo_error(fmt::format("--batch_size {} with --batch_size_scaled leaves {} processes "
                                  "without a prompt",
                                  o.batch_size, world_size),
                      fmt::format("pass --batch_size {} or more", world_size));
  auto in = open_grpo_inputs(o);
  if (!in) return in.error();
  const int64_t per_step = batch_per_process(o, world_size) * world_size;
  const auto n = static_cast<int64_t>(in->prompts.prompts.size());
  if (per_step > n)
    return grpo_error(fmt::format("--prompts {} holds {} prompts, fewer than one step takes ({} "
                                  "processes x --batch_size {})",
                                  o.prompts, n, world_size, batch_per_process(o, world_size)),
                      fmt::format("pass --batch_size {} or less, or more prompts",
                                  std::max<int64_t>(1, n / world_size)));
  return ok_status();
}

}  // namespace gpulab::train
