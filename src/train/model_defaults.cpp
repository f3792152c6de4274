// Model-kind defaults of `gpulab train` (see model_defaults.h).
#include "train/model_defaults.h"

#include <fmt/format.h>

#include "train/models/decoder_config.h"

namespace gpulab::train {

double language_model_learning_rate(int64_t hidden_size) {
  if (hidden_size <= 512) return 3e-3;
  if (hidden_size <= 1024) return 6e-4;
  return 3e-4;
}

void apply_model_defaults(TrainOptions& o, const std::set<std::string>& given) {
  o.model_defaults.clear();
  const auto set = [&](const char* flag, auto& field, auto value, const std::string& shown) {
    if (given.count(flag) != 0) return;
    field = value;
    o.model_defaults.push_back(fmt::format("{} {}", flag, shown));
  };
  // GRPO fine-tunes a trained policy: TRL GRPOTrainer's AdamW at 1e-6, no decay, clipping at
  // 1.0, and a few prompts a step (each makes --group_size completions).
  if (o.task == "grpo") {
    set("optimizer", o.optimizer, std::string("adamw"), "adamw");
    set("learning_rate", o.learning_rate, 1e-6, "1e-06");
    set("weight_decay", o.weight_decay, 0.0, "0");
    set("clip_grad", o.clip_grad, 1.0, "1.0");
    set("batch_size", o.batch_size, int64_t{8}, "8");
    return;
  }
  if (!is_language_model(o.model)) return;
  auto cfg = find_decoder_config(o.model);
  if (!cfg) return;
  set("optimizer", o.optimizer, std::string("adamw"), "adamw");
  const double lr = language_model_learning_rate(cfg->hidden_size);
  set("learning_rate", o.learning_rate, lr, fmt::format("{:g}", lr));
  set("weight_decay", o.weight_decay, 0.1, "0.1");
  set("lr_schedule", o.lr_schedule, std::string("cosine"), "cosine");
  // Warm-up over the first 5 % of the scheduled steps: AdamW's first second-moment estimates
  // are noisy, and full-size steps on them can throw a fresh decoder off (GPT-3 and nanoGPT
  // warm up over a small share of the run too).
  const double warmup = 0.05 * static_cast<double>(o.num_epochs);
  set("warmup_epochs", o.warmup_epochs, warmup, fmt::format("{:g}", warmup));
  set("clip_grad", o.clip_grad, 1.0, "1.0");
}

}  // namespace gpulab::train
