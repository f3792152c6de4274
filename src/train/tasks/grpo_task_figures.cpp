// GRPO's figures per step and per epoch, its header and its outputs (see grpo_task.h).
#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "core/strings.h"
#include "train/tasks/grpo_task.h"
#include "train/weights/hf_shards.h"
#include "train/weights_export.h"

namespace gpulab::train {

namespace {

// The sums in a fixed order, to add up over ranks in one all-reduce: one list for both ways.
using SumField = double GrpoTask::Sums::*;
constexpr SumField kSumFields[] = {&GrpoTask::Sums::reward,
                                   &GrpoTask::Sums::reward_sq,
                                   &GrpoTask::Sums::rows,
                                   &GrpoTask::Sums::completion_tokens,
                                   &GrpoTask::Sums::gen_tokens,
                                   &GrpoTask::Sums::gen_seconds,
                                   &GrpoTask::Sums::step_seconds,
                                   &GrpoTask::Sums::sequence_tokens,
                                   &GrpoTask::Sums::kl,
                                   &GrpoTask::Sums::clip_low,
                                   &GrpoTask::Sums::clip_high,
                                   &GrpoTask::Sums::loss,
                                   &GrpoTask::Sums::micro,
                                   &GrpoTask::Sums::groups,
                                   &GrpoTask::Sums::dropped_groups,
                                   &GrpoTask::Sums::failed_rewards,
                                   &GrpoTask::Sums::wait_seconds,
                                   &GrpoTask::Sums::importance_mean,
                                   &GrpoTask::Sums::importance_capped};

std::vector<double> sums_vector(const GrpoTask::Sums& s) {
  std::vector<double> v;
  for (SumField f : kSumFields) v.push_back(s.*f);
  return v;
}

GrpoTask::Sums sums_of(const std::vector<double>& v) {
  GrpoTask::Sums s;
  for (size_t i = 0; i < v.size() && i < std::size(kSumFields); ++i) s.*kSumFields[i] = v[i];
  return s;
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

// What a step's record says, from the sums over ranks (world: seconds are summed over ranks too);
// the importance weights' figures where they were computed.
Json step_json(const GrpoTask::Sums& s, int world, bool importance) {
  const double mean = ratio(s.reward, s.rows);
  const double gen_s = s.gen_seconds / world, step_s = s.step_seconds / world;
  const double wait_s = s.wait_seconds / world;
  Json rec{{"mean_reward", mean},
           {"reward_std", std::sqrt(std::max(0.0, ratio(s.reward_sq, s.rows) - mean * mean))},
           {"kl", ratio(s.kl, s.micro)},
           {"clip_fraction", ratio(s.clip_low + s.clip_high, s.micro)},
           {"clip_low", ratio(s.clip_low, s.micro)},
           {"clip_high", ratio(s.clip_high, s.micro)},
           {"loss", ratio(s.loss, s.micro)},
           {"completion_length", ratio(s.completion_tokens, s.rows)},
           {"completions", s.rows},
           {"generation_tokens_per_s", ratio(s.gen_tokens, gen_s)},
           {"training_tokens_per_s", ratio(s.sequence_tokens, step_s - wait_s)},
           {"generation_share", ratio(gen_s, step_s)},
           {"rollout_wait_share", ratio(wait_s, step_s)},
           {"step_seconds", step_s},
           {"dropped_groups", s.dropped_groups},
           {"groups", s.groups},
           {"failed_rewards", s.failed_rewards}};
  if (importance) {
    rec["importance_ratio"] = ratio(s.importance_mean, s.micro);
    rec["importance_capped"] = ratio(s.importance_capped, s.micro);
  }
  return rec;
}

// Where the rollouts are sampled, and with which policy.
std::string generation_fact(const TrainOptions& o) {
  if (o.generation_gpus == 0) return "generation on the training process";
  return fmt::format(
      "generation on {} rank(s) of its own{}, weights sent after each optimizer step{}",
      o.generation_gpus,
      o.generation_gpu_ids.empty() ? "" : fmt::format(" (local GPUs {})", o.generation_gpu_ids),
      o.overlap_generation ? "; overlapped: a step's rollouts are sampled while the step before "
                             "trains, by the policy before it"
                           : "");
}

// The importance sampling against the sampling policy, for the loss line ("" when off).
std::string importance_fact(const rl::ImportanceSampling& is) {
  if (is.mode == rl::ImportanceMode::kOff) return "";
  return fmt::format(", importance sampling against the sampling policy: {} to [{:g}, {:g}]",
                     rl::importance_mode_name(is.mode), is.min, is.max);
}

}  // namespace

// A rollout's own figures added to a step's (its generation only once: the step that made it).
void add_rollout_sums(GrpoTask::Sums& s, const GrpoTask::Sums& r, bool with_generation) {
  s.reward += r.reward, s.reward_sq += r.reward_sq, s.rows += r.rows;
  s.completion_tokens += r.completion_tokens, s.sequence_tokens += r.sequence_tokens;
  s.groups += r.groups, s.dropped_groups += r.dropped_groups, s.failed_rewards += r.failed_rewards;
  if (with_generation)
    s.gen_tokens += r.gen_tokens, s.gen_seconds += r.gen_seconds, s.wait_seconds += r.wait_seconds;
}

// The step's figures summed over ranks: its rollouts' (every micro-batch's under --grad_accum;
// under --mu the steps after the first repeat their rollout's, without its generation) and its
// loss's.
std::optional<StepFigures> GrpoTask::after_optimizer_step(int64_t step) {
  Sums s = step_;
  step_ = Sums{};
  if (!fresh_rollout_ && rollout_) add_rollout_sums(s, rollout_->sums, false);
  fresh_rollout_ = false;
  s.step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - step_t0_).count();
  step_t0_ = std::chrono::steady_clock::now();
  auto all = torch::tensor(sums_vector(s), torch::kFloat64);
  if (env_.dist.world_size > 1) env_.dist.all_reduce_sum(all);
  const auto* p = all.data_ptr<double>();
  const bool importance = in_.loss.importance.mode != rl::ImportanceMode::kOff;
  Json rec = step_json(sums_of({p, p + all.numel()}), env_.dist.world_size, importance);
  // Generation ranks: which policy sampled this step's rollouts, and (test hook) the fingerprints
  // of the weights they held and the training ranks had.
  if (env_.dist.rollout_source && rollout_) rec["policy_step"] = rollout_->policy_step;
  if (!weight_hashes_.is_null()) rec["weight_hashes"] = std::exchange(weight_hashes_, Json());
  // Optimizer steps in the run: μ a rollout batch, --grad_accum micro-batches each.
  const int64_t per_epoch =
      optimizer_steps_per_epoch(steps_per_epoch_ * env_.opts.mu, env_.opts.grad_accum);
  const int64_t total = per_epoch * env_.opts.num_epochs;
  std::string line = fmt::format(
      "Step {}/{}: reward {:.3f} ± {:.3f} || KL {:.4f} || clip {:.3f} || completion {:.1f} tok || "
      "gen {:.0f} tok/s, train {:.0f} tok/s, generating {:.0f}% of {:.2f}s",
      step, env_.opts.max_steps > 0 ? std::min(total, env_.opts.max_steps) : total,
      rec["mean_reward"].get<double>(), rec["reward_std"].get<double>(), rec["kl"].get<double>(),
      rec["clip_fraction"].get<double>(), rec["completion_length"].get<double>(),
      rec["generation_tokens_per_s"].get<double>(), rec["training_tokens_per_s"].get<double>(),
      100 * rec["generation_share"].get<double>(), rec["step_seconds"].get<double>());
  // Generation ranks: how much of the step the training ranks spent waiting for rollouts (all
  // of the generation without --overlap_generation, what it did not hide with it).
  if (env_.dist.rollout_source)
    line += fmt::format(" || waiting {:.0f}% for rollouts",
                        100 * rec["rollout_wait_share"].get<double>());
  // The importance weights against the sampling policy: their mean, and how many the bounds cut.
  if (importance)
    line += fmt::format(" || IS {:.3f} ({:.0f}% capped)", rec["importance_ratio"].get<double>(),
                        100 * rec["importance_capped"].get<double>());
  if (rec["dropped_groups"].get<double>() > 0)
    line += fmt::format(" || {:.0f} of {:.0f} groups dropped", rec["dropped_groups"].get<double>(),
                        rec["groups"].get<double>());
  if (rec["failed_rewards"].get<double>() > 0)
    line +=
        fmt::format(" || {:.0f} rewards failed (scored 0)", rec["failed_rewards"].get<double>());
  epoch_steps_.push_back(rec);
  return StepFigures{line, rec};
}

std::vector<std::pair<std::string, std::string>> GrpoTask::step_charts() const {
  std::vector<std::pair<std::string, std::string>> charts = {
      {"mean_reward", "Mean reward"},
      {"kl", "KL to the reference"},
      {"clip_fraction", "Clip fraction"},
      {"completion_length", "Completion length (tokens)"},
      {"generation_share", "Share of the step generating"}};
  if (in_.loss.importance.mode != rl::ImportanceMode::kOff)
    charts.emplace_back("importance_ratio", "Mean importance weight against the sampling policy");
  return charts;
}

// The epoch's means over its steps, and the first and last steps' rewards.
void GrpoTask::add_epoch_figures(EpochRecord& rec) const {
  if (epoch_steps_.empty()) return;
  Json f = Json::object();
  for (const char* key : {"mean_reward", "reward_std", "kl", "clip_fraction", "completion_length",
                          "generation_tokens_per_s", "training_tokens_per_s", "generation_share",
                          "rollout_wait_share", "importance_ratio", "importance_capped"}) {
    if (!epoch_steps_.front().contains(key)) continue;  // the importance figures: only when on
    double sum = 0;
    for (const auto& s : epoch_steps_) sum += s[key].get<double>();
    f[key] = sum / static_cast<double>(epoch_steps_.size());
  }
  f["first_step_reward"] = epoch_steps_.front()["mean_reward"];
  f["last_step_reward"] = epoch_steps_.back()["mean_reward"];
  rec.task_figures = f;
  rec.task_summary = fmt::format(
      "reward {:.3f} (steps {:.3f} -> {:.3f}) || KL {:.4f} || clip {:.3f} || completion {:.1f} "
      "tok || gen {:.0f} tok/s, train {:.0f} tok/s, generating {:.0f}%",
      f["mean_reward"].get<double>(), f["first_step_reward"].get<double>(),
      f["last_step_reward"].get<double>(), f["kl"].get<double>(), f["clip_fraction"].get<double>(),
      f["completion_length"].get<double>(), f["generation_tokens_per_s"].get<double>(),
      f["training_tokens_per_s"].get<double>(), 100 * f["generation_share"].get<double>());
}

std::vector<std::string> GrpoTask::header(const RunFacts& facts) const {
  const TrainOptions& o = env_.opts;
  const DecoderConfig& c = model_->config();
  const rl::GrpoLossOptions& l = in_.loss;
  return {
      fmt::format("GRPO of {} ({} parameters, {} layers, vocabulary {}) on {} ({} prompts)",
                  in_.weights ? in_.weights->weights.string() : o.model, c.num_parameters(),
                  c.num_layers, c.vocab_size, in_.prompts.source, in_.prompts.prompts.size()),
      fmt::format("{} prompts x {} completions per process a step, {} steps per epoch{}",
                  prompts_per_rank_, o.group_size, steps_per_epoch_,
                  o.mu > 1 ? fmt::format(" ({} optimizer steps on each)", o.mu) : ""),
      fmt::format("Sampling: temperature {:g}, top-p {:g}, top-k {}, at most {} new tokens, EOS "
                  "id {} ({})",
                  o.temperature, o.top_p, o.top_k, o.max_new_tokens, in_.sampling.eos_id,
                  generation_fact(o)),
      fmt::format("Loss: {}, epsilon {:g} / {:g}, beta {:g}{}{}{}", rl::grpo_loss_type_name(l.type),
                  l.epsilon_low, l.epsilon_high, l.beta, ref_ ? " (frozen reference copy)" : "",
                  o.dynamic_sampling ? ", dynamic sampling" : "", importance_fact(l.importance)),
      fmt::format("Reward: {} (on failure: {}); tokenizer {}", in_.reward->name(), o.reward_failure,
                  in_.tokenizer_spec),
      fmt::format("Using {} optimizer with lr={:g}, weight_decay={:g}, schedule={} (warmup {} "
                  "steps), clip_grad={:g}",
                  o.optimizer, o.learning_rate, o.weight_decay, o.lr_schedule, facts.warmup_steps,
                  o.clip_grad),
      o.model_defaults.empty()
          ? std::string("GRPO defaults: none (every optimization flag passed)")
          : "GRPO defaults for flags not passed: " + join(o.model_defaults, ", "),
      fmt::format("Device: {}, Threads: {}, Precision: {}, World size: {}, Backend: {}",
                  env_.device.str(), env_.threads, o.precision, env_.dist.world_size,
                  env_.dist.backend())};
}

std::vector<std::string> GrpoTask::write_weights(Classifier& /*model*/, TensorStream& state,
                                                 const std::filesystem::path& dir) const {
  const auto weights =
      write_hf_folder(dir, model_->config(), state, in_.tokenizer_spec, "gpulab train --task grpo",
                      parse_shard_size(env_.opts.max_shard_size).value_or_throw());
  return {"Weights: " + weights.string(), "Config: " + (dir / "config.json").string()};
}

std::string GrpoTask::input_fact() const {
  return fmt::format("prompts + {} new tokens", env_.opts.max_new_tokens);
}

}  // namespace gpulab::train
