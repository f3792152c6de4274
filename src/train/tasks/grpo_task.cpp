// GRPO's data, policy, rollouts and loss for the trainer (see grpo_task.h); its figures, header
// and outputs are in grpo_task_figures.cpp.
#include "train/tasks/grpo_task.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "train/models/lm_families.h"
#include "train/rl/dynamic_sampling.h"
#include "train/rl/grpo_advantages.h"
#include "train/rl/grpo_loss.h"
#include "train/rl/grpo_weight_sync.h"
#include "train/tasks/grpo_rollout_source.h"
#include "train/tasks/grpo_rollouts.h"
#include "train/tasks/lm_task.h"
#include "train/test_hooks.h"
#include "train/token_log_probs.h"

namespace gpulab::train {

namespace {
using GrpoClock = std::chrono::steady_clock;
double grpo_seconds_since(GrpoClock::time_point t) {
  return std::chrono::duration<double>(GrpoClock::now() - t).count();
}
}  // namespace

// Steps per epoch: every rank takes --batch_size prompts a step; μ optimizer steps (micro-batches)
// train on each step's rollouts.
int64_t GrpoTask::open_data() {
  in_ = open_grpo_inputs(env_.opts).value_or_throw();
  prompts_per_rank_ = batch_per_process(env_.opts, env_.dist.world_size);
  steps_per_epoch_ = grpo_steps_per_epoch(static_cast<int64_t>(in_.prompts.prompts.size()),
                                          prompts_per_rank_, env_.dist.world_size);
  return steps_per_epoch_ * env_.opts.mu;
}

// The policy from --weights (read here), else --model's shape (its --init_weights the loop loads).
ClassifierPtr GrpoTask::build_model() {
  model_ = build_grpo_policy(in_, env_.device);
  // --attention and --activation_checkpointing as language-model training reads them.
  apply_decoder_options(*model_, env_.opts);
  if (env_.opts.beta > 0) build_reference();
  return model_;
}

// A frozen copy of the policy as it starts (its --weights, or --init_weights' file, else its
// seeded initialisation), so a resumed run's reference is the same as the first run's.
void GrpoTask::build_reference() {
  // In the compute dtype before anything is loaded, as the trainer does for the policy: an fp64
  // --init_weights file reaches both unrounded, so the reference starts equal to the policy.
  ref_ = build_causal_lm(in_.config, env_.device);
  ref_->to(env_.device, env_.compute_dtype);
  load_state_dict(*ref_, module_state_dict(*model_), "the reference copy").value_or_throw();
  if (!env_.opts.init_weights.empty()) {
    auto files = locate_model_files(env_.opts.init_weights).value_or_throw();
    auto tensors = from_hf_names(in_.config, read_model_weights(files).value_or_throw());
    load_state_dict(*ref_, tensors, "--init_weights " + env_.opts.init_weights).value_or_throw();
  }
  for (auto& p : ref_->parameters()) p.set_requires_grad(false);
  apply_decoder_options(*ref_, env_.opts);  // checkpointing never applies: no gradient
  ref_->eval();
}

StateDict GrpoTask::init_weight_names(StateDict weights) const {
  return from_hf_names(model_->config(), std::move(weights));
}

MemoryFormatChoice GrpoTask::memory_format(Classifier& /*model*/) {
  return {false, "contiguous", "language model"};
}

void GrpoTask::start_epoch(int64_t /*epoch*/, int64_t /*skip*/) {
  epoch_steps_.clear();
  step_t0_ = GrpoClock::now();
}

// The prompts this rank takes at `step` (grpo_step_prompts: the one home of the split).
std::vector<int64_t> GrpoTask::prompts_of_step(int64_t step) const {
  return grpo_step_prompts(static_cast<int64_t>(in_.prompts.prompts.size()), env_.opts.seed,
                           steps_per_epoch_, step, env_.dist.rank, env_.dist.world_size,
                           prompts_per_rank_);
}

// μ consecutive micro-batches share one step's rollouts (a resumed run samples afresh).
std::optional<TaskBatch> GrpoTask::next_batch(int64_t index) {
  const int64_t step = index / env_.opts.mu;
  if (!rollout_ || rollout_->step != step) {
    rollout_ = make_rollout(step, index);
    add_rollout_sums(step_, rollout_->sums, true);
    fresh_rollout_ = true;
  }
  return rollout_->batch;
}

// log π of each completion token under `model` (no gradient), as the loss computes it.
torch::Tensor GrpoTask::log_probs_of(CausalLm& model, const TaskBatch& batch) const {
  torch::NoGradGuard no_grad;
  torch::Tensor outputs;
  {
    AutocastGuard autocast(env_.precision, env_.device);
    outputs = model.forward(batch.inputs);
  }
  const auto logits = completion_logits(outputs, batch.extra.at("positions"));
  return token_log_probs(logits.to(env_.compute_dtype), batch.targets,
                         log_prob_temperature(env_.opts.temperature));
}

// The completions' rewards (their text: an EOS token is the end, not text), under the failure
// policy; counts generated tokens, rewards and failures into sums.
rl::ResolvedRewards GrpoTask::score(const std::vector<std::vector<int64_t>>& completions,
                                    const std::vector<const rl::Prompt*>& sources,
                                    Sums& sums) const {
  const auto g = static_cast<size_t>(env_.opts.group_size);
  std::vector<std::string> texts;
  for (const auto& c : completions) {
    std::vector<int32_t> ids;
    for (int64_t t : c)
      if (t != in_.sampling.eos_id) ids.push_back(static_cast<int32_t>(t));
    texts.push_back(in_.tokenizer->decode(ids).value_or(std::string()));
    sums.gen_tokens += static_cast<double>(c.size());
  }
  std::vector<rl::RewardSample> samples;
  for (size_t i = 0; i < completions.size(); ++i) samples.push_back({sources[i / g], texts[i]});
  auto rewards =
      rl::resolve_rewards(*in_.reward, in_.reward->score(samples), in_.failure).value_or_throw();
  sums.failed_rewards = static_cast<double>(rewards.failed);
  for (double v : rewards.values) {
    sums.reward += v;
    sums.reward_sq += v * v;
  }
  return rewards;
}

// Training rank 0 sends the generation ranks the policy as it is after `policy_step` optimizer
// steps, once per step that samples; with the weight-hash test hook, every rank's fingerprints
// go into the next step record.
void GrpoTask::sync_policy(RolloutSource& source, int64_t policy_step) {
  if (synced_step_ == policy_step) return;
  synced_step_ = policy_step;
  const auto generation = source.send_weights(*model_, policy_step);
  if (!test_hooks::hash_synced_weights()) return;
  auto training = torch::zeros({env_.dist.world_size}, torch::kLong);
  training[env_.dist.rank] = static_cast<int64_t>(rl::weights_hash(*model_));
  if (env_.dist.world_size > 1) env_.dist.all_reduce_sum(training);
  const auto hex = [](uint64_t h) { return fmt::format("{:016x}", h); };
  weight_hashes_ = Json{{"generation", Json::array()}, {"training", Json::array()}};
  for (uint64_t h : generation) weight_hashes_["generation"].push_back(hex(h));
  for (int64_t i = 0; i < training.numel(); ++i)
    weight_hashes_["training"].push_back(hex(static_cast<uint64_t>(training[i].item<int64_t>())));
}

// The first micro-batch index the run does not train: its epochs' batches, or fewer where
// --max_steps ends it (the trainer stops before a batch once that many optimizer steps are done).
int64_t GrpoTask::run_end_index() const {
  const TrainOptions& o = env_.opts;
  int64_t per_epoch = steps_per_epoch_ * o.mu;
  if (o.limit_train_batches > 0) per_epoch = std::min(per_epoch, o.limit_train_batches);
  int64_t lo = 0, hi = per_epoch * o.num_epochs;
  if (o.max_steps <= 0) return hi;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (optimizer_steps_before(mid, per_epoch, o.grad_accum) >= o.max_steps)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The step's completions from this rank's generation rank, the policy sent first (the optimizer
// steps of the `index` micro-batches trained so far, --grad_accum a step, so every micro-batch of
// a step samples with the same policy). With --overlap_generation the next step is asked for
// before this one trains, with the same policy: its rollouts are sampled while this step trains.
StepRollouts GrpoTask::received_completions(RolloutSource& source, int64_t step, int64_t index,
                                            Rollout& r) {
  const auto t0 = GrpoClock::now();
  const int64_t policy =
      optimizer_steps_before(index, steps_per_epoch_ * env_.opts.mu, env_.opts.grad_accum);
  if (!source.requested(step)) {
    sync_policy(source, policy);
    source.request(step);
  }
  auto share = source.receive(step);
  if (env_.opts.overlap_generation && (step + 1) * env_.opts.mu < run_end_index()) {
    sync_policy(source, policy);
    source.request(step + 1);
  }
  r.sums.gen_seconds = share.generation_seconds;
  r.sums.wait_seconds = grpo_seconds_since(t0);
  r.policy_step = share.policy_step;
  return {std::move(share.completions), std::move(share.log_probs)};
}

// The step's completions: from this rank's generation rank when there are generation ranks,
// else sampled here from this rank's own stream. Records the generation time (and the policy
// step) in r.
StepRollouts GrpoTask::completions_of(int64_t step, int64_t index,
                                      const std::vector<std::vector<int64_t>>& prompts,
                                      Rollout& r) {
  if (auto* source = env_.dist.rollout_source.get())
    return received_completions(*source, step, index, r);
  const auto t0 = GrpoClock::now();
  // Each rank and step draws from its own seed: a resumed run samples what the first would have.
  TokenSampler sampler(
      in_.sampling, grpo_sampler_seed(env_.opts.seed, step, env_.dist.rank, env_.dist.world_size));
  auto rollouts = rollouts_for_step(*model_, prompts, env_.opts.group_size, in_.sampling, sampler);
  r.sums.gen_seconds = r.sums.wait_seconds = grpo_seconds_since(t0);
  return rollouts;
}

GrpoTask::Rollout GrpoTask::make_rollout(int64_t step, int64_t index) {
  const int64_t g = env_.opts.group_size;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<const rl::Prompt*> sources;
  for (int64_t p : prompts_of_step(step)) {
    prompts.push_back(in_.prompt_ids[static_cast<size_t>(p)]);
    sources.push_back(&in_.prompts.prompts[static_cast<size_t>(p)]);
  }
  Rollout r;
  r.step = step;
  const auto rollouts = completions_of(step, index, prompts, r);
  const auto& completions = rollouts.completions;
  const auto rewards = score(completions, sources, r.sums);
  r.sums.rows = static_cast<double>(rewards.values.size());
  r.sums.completion_tokens = r.sums.gen_tokens;
  r.sums.groups = static_cast<double>(prompts.size());
  const auto reward_t = torch::tensor(rewards.values, torch::kFloat64);
  const auto adv = rl::group_advantages(reward_t, g, in_.loss.type != rl::GrpoLossType::kDrGrpo);
  // Dynamic sampling drops the groups whose rewards are all equal (no advantage to learn from).
  std::vector<int64_t> rows(completions.size());
  std::iota(rows.begin(), rows.end(), 0);
  if (env_.opts.dynamic_sampling) {
    auto kept = rl::drop_uniform_groups(rewards.values, g).value_or_throw();
    r.sums.dropped_groups = static_cast<double>(kept.dropped);
    if (!kept.kept_rows.empty())
      rows = kept.kept_rows;
    else
      r.batch.extra["empty"] = torch::ones({1});  // trains nothing; every rank still steps
  }
  auto t = rollout_tensors(prompts, rollouts, rows, g, std::max<int64_t>(0, in_.sampling.eos_id));
  r.sums.sequence_tokens = static_cast<double>(t.sequence_tokens);
  r.batch.inputs = t.inputs.to(env_.device);
  r.batch.targets = t.tokens.to(env_.device);
  r.batch.extra["positions"] = t.positions.to(env_.device);
  r.batch.extra["mask"] = t.mask.to(env_.device);
  if (t.sampling_log_probs.defined())
    r.batch.extra["sampling_log_probs"] = t.sampling_log_probs.to(env_.device);
  r.batch.extra["advantages"] =
      adv.index_select(0, torch::tensor(rows, torch::kLong)).to(env_.device);
  model_->eval();
  if (env_.opts.mu > 1) r.batch.extra["old_log_probs"] = log_probs_of(*model_, r.batch);
  if (ref_) r.batch.extra["ref_log_probs"] = log_probs_of(*ref_, r.batch);
  model_->train();
  return r;
}

// The GRPO loss over the completion tokens; `count` is their number.
StepLoss GrpoTask::loss(const torch::Tensor& outputs, const TaskBatch& batch) const {
  if (batch.extra.count("empty") != 0) return {outputs.sum() * 0.0, {}, 0};
  const auto logits = completion_logits(outputs, batch.extra.at("positions"));
  rl::GrpoLossInputs li;
  li.log_probs = token_log_probs(logits.to(env_.compute_dtype), batch.targets,
                                 log_prob_temperature(env_.opts.temperature));
  if (auto it = batch.extra.find("old_log_probs"); it != batch.extra.end())
    li.old_log_probs = it->second;
  if (auto it = batch.extra.find("ref_log_probs"); it != batch.extra.end())
    li.ref_log_probs = it->second;
  if (auto it = batch.extra.find("sampling_log_probs"); it != batch.extra.end())
    li.sampling_log_probs = it->second;
  li.advantages = batch.extra.at("advantages").to(li.log_probs.scalar_type());
  li.mask = batch.extra.at("mask");
  const auto res = rl::grpo_loss(li, in_.loss);
  // The figures in one copy to the host (one wait on a GPU, not five).
  const auto as_double = [](const torch::Tensor& t) { return t.detach().to(torch::kDouble); };
  const auto or_zero = [&](const torch::Tensor& t) {
    return t.defined() ? as_double(t) : torch::zeros({}, torch::kDouble).to(res.loss.device());
  };
  const auto figures = torch::stack({as_double(res.loss), or_zero(res.kl), as_double(res.clip_low),
                                     as_double(res.clip_high), as_double(li.mask.sum()),
                                     or_zero(res.importance_mean), or_zero(res.importance_capped)})
                           .cpu();
  const auto* f = figures.data_ptr<double>();
  step_.micro += 1;
  step_.loss += f[0];
  step_.kl += f[1];
  step_.clip_low += f[2];
  step_.clip_high += f[3];
  step_.importance_mean += f[5];
  step_.importance_capped += f[6];
  return {res.loss, {}, static_cast<int64_t>(f[4])};
}

}  // namespace gpulab::train
