// `gpulab plan --model M --gpus N [--gpu h100|mi300x|...] [--shard S] [--batch_size B]
// [--precision P] [--activation_checkpointing]`: per-device memory by part for each shard stage,
// whether it fits, the largest batch that fits, and the bytes each device sends per step; for a
// language model also its device-mesh layouts (--tp, --pp, --gpus_per_node: plan_mesh.h), or
// with --generation_gpus N GRPO's split into generation and training GPUs.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/flag_checks.h"
#include "core/table.h"
#include "dist_flags.h"
#include "plan_mesh.h"
#include "train/dist/decoder_footprint.h"
#include "train/dist/memory_plan.h"
#include "train/dist/shard_precision.h"
#include "train/dist/sharded_model.h"
#include "train/dist/wrap_policy.h"
#include "train/models/decoder_config.h"
#include "train/models/registry.h"
#include "train/train_option_rows.h"
#include "train/train_options.h"
#include "train_flags.h"
#include "usage.h"

namespace gpulab::cli {
namespace {

// The job planned: the trainer's own options (model, batch, sequence, precision, optimizer,
// attention, checkpointing) and sharding flags, checked by their rows, plus what only a plan has.
struct PlanOptions {
  train::TrainOptions train;      // seq_len, input_size 0: the model's own
  train::dist::DistOptions dist;  // --shard (or "all": every stage), --shard_wrap, dtypes
  int gpus = 1;
  std::string gpu = "h100";
  int64_t vocab_size = 0;  // language models: 0 = the shape's own
  int64_t num_classes = 1000;
  // Language models: the device mesh (0: every size that fits) and GRPO's split. Read from the
  // trainer's --tp, --pp, --allow_tp_across_nodes and --generation_gpus (plan_mesh_flags).
  int gpus_per_node = 8;
  int tp = 0;
  int pp = 0;
  bool allow_tp_across_nodes = false;
  int generation_gpus = 0;  // GPUs that only generate (GRPO); the rest train
  int64_t prompt_len = 256;
};

// Tensors of optimizer state per parameter: AdamW's two moments, SGD's momentum.
int optimizer_states(const PlanOptions& o) {
  return o.train.optimizer == "adam" || o.train.optimizer == "adamw" ? 2 : 1;
}
// Bytes of a parameter (the master copy: autocast keeps fp32 weights) and of an activation.
int64_t param_element_bytes(const PlanOptions& o) {
  return o.train.precision == "fp64" ? 8 : 4;
}
int64_t activation_element_bytes(const PlanOptions& o) {
  return o.train.precision == "bf16" || o.train.precision == "fp16" ? 2 : param_element_bytes(o);
}

// The per-stage table: memory by part at the step's peak, fit, largest batch, traffic. Returns
// each printed stage's name and peak total.
std::vector<std::pair<std::string, int64_t>> print_stages(const PlanOptions& o,
                                                          const train::dist::ModelFootprint& f,
                                                          int64_t capacity) {
  namespace d = train::dist;
  const auto dtypes = d::resolve_shard_dtypes(o.train.precision, o.dist.shard_param_dtype,
                                              o.dist.shard_reduce_dtype);
  const std::string master = o.train.precision == "fp64" ? "fp64" : "fp32";
  auto dtype_name = [&](const std::optional<torch::ScalarType>& t) {
    return !t ? master : *t == torch::kBFloat16 ? "bf16" : "fp32";
  };
  std::printf(
      "Per device on %d x %s (%s), batch %lld per device, %s, optimizer %s%s; sharded stages: "
      "%s compute copies, gradients reduced in %s\n",
      o.gpus, o.gpu.c_str(), d::human_bytes(capacity).c_str(),
      static_cast<long long>(o.train.batch_size), o.train.precision.c_str(),
      o.train.optimizer.c_str(),
      o.train.activation_checkpointing ? ", activation checkpointing" : "",
      dtype_name(dtypes.param).c_str(), dtype_name(dtypes.reduce).c_str());
  TextTable table({"shard", "params", "grads", "optimizer", "activations", "buffers", "total",
                   "fits", "max batch", "comm/step"});
  // What a rank holds between steps: the figure `gpulab train --shard` measures after step 1.
  TextTable held({"shard", "params", "grads", "optimizer", "total"});
  std::vector<std::pair<std::string, int64_t>> peaks;
  for (const auto& name : d::shard_stage_names()) {
    if (o.dist.shard != "all" && o.dist.shard != name) continue;
    d::PlanQuery q;
    q.stage = d::parse_shard_stage(name);
    q.world = o.gpus;
    q.batch_size = o.train.batch_size;
    q.optimizer_states = optimizer_states(o);
    q.activation_scale = activation_element_bytes(o) < param_element_bytes(o) ? 0.5 : 1.0;
    q.activation_checkpointing = o.train.activation_checkpointing;
    if (dtypes.param) q.compute_bytes = c10::elementSize(*dtypes.param);
    if (dtypes.reduce) q.reduce_bytes = c10::elementSize(*dtypes.reduce);
    auto m = d::plan_peak(f, q);
    d::PlanQuery one = q;
    one.batch_size = 1;
    const int64_t per_sample = std::max<int64_t>(1, d::plan_peak(f, one).activations);
    const int64_t rest = m.total() - m.activations;
    const int64_t max_batch = capacity > rest ? (capacity - rest) / per_sample : 0;
    table.add_row({name, d::human_bytes(m.params), d::human_bytes(m.grads),
                   d::human_bytes(m.optimizer), d::human_bytes(m.activations),
                   d::human_bytes(m.buffers), d::human_bytes(m.total()),
                   m.total() <= capacity ? "yes" : "no", std::to_string(max_batch),
                   d::human_bytes(d::comm_bytes_per_step(f, q))});
    peaks.emplace_back(name, m.total());
    const auto a = d::plan_after_step(f, q);
    held.add_row({name, d::human_bytes(a.params), d::human_bytes(a.grads),
                  d::human_bytes(a.optimizer), d::human_bytes(a.params + a.grads + a.optimizer)});
  }
  std::printf("%s", table.render().c_str());
  std::printf("comm/step: bytes each device sends per optimizer step (NCCL or Gloo).\n");
  std::printf(
      "Held per device after an optimizer step (`gpulab train --shard` prints it after step 1 "
      "beside the bytes of the tensors the rank holds):\n%s",
      held.render().c_str());
  return peaks;
}

// The mesh planner's question: this model on these GPUs, in the plan's precision and batch.
train::parallel::MeshPlanQuery mesh_query(const PlanOptions& o, const train::DecoderConfig& cfg,
                                          int64_t capacity) {
  train::parallel::MeshPlanQuery q;
  q.model = cfg;
  q.gpus = o.gpus;
  q.gpus_per_node = o.gpus_per_node;
  q.capacity_bytes = capacity;
  q.tp = o.tp;
  q.pp = o.pp;
  q.allow_tp_across_nodes = o.allow_tp_across_nodes;
  const auto& stages = train::dist::shard_stage_names();
  const auto it = std::find(stages.begin(), stages.end(), o.dist.shard);
  q.shard = it == stages.end() ? -1 : static_cast<int>(it - stages.begin());
  auto& b = q.base;
  b.model = train::parallel::decoder_shape(cfg);
  b.seq_len = o.train.seq_len;
  b.micro_batch = o.train.batch_size;
  b.micro_batches = o.train.grad_accum;
  b.param_bytes = b.grad_bytes = param_element_bytes(o);
  b.optimizer_bytes = optimizer_states(o) * param_element_bytes(o);
  b.activation_bytes = activation_element_bytes(o);
  return q;
}

train::DecoderConfig plan_decoder_config(const PlanOptions& o, int64_t seq_len,
                                         const char* seq_flag) {
  auto cfg = train::find_decoder_config(o.train.model).value_or_throw();
  if (o.vocab_size > 0) cfg.vocab_size = o.vocab_size;
  if (seq_len > cfg.max_positions)
    throw Exception(Code::kInvalidArgument,
                    fmt::format("{} {} is beyond {}'s {} positions", seq_flag, seq_len, cfg.name,
                                cfg.max_positions),
                    fmt::format("pass {} {} or less", seq_flag, cfg.max_positions));
  return cfg;
}

// The decoder's footprint at `seq_len` and the line that describes it.
train::dist::ModelFootprint print_decoder_footprint(const PlanOptions& o,
                                                    const train::DecoderConfig& cfg,
                                                    int64_t seq_len) {
  namespace d = train::dist;
  const auto f =
      d::decoder_footprint(cfg, seq_len, o.train.attention == "gpulab", param_element_bytes(o));
  std::printf(
      "Model %s: %lld parameters (%s), %zu units (one per block + the root), activations %s "
      "per sequence of %lld tokens, %s attention (fitted on probe models of this "
      "implementation)\n",
      cfg.name.c_str(), static_cast<long long>(f.params),
      d::human_bytes(f.params * f.param_bytes).c_str(), f.units.size(),
      d::human_bytes(f.activation_bytes_per_sample).c_str(), static_cast<long long>(seq_len),
      o.train.attention.c_str());
  return f;
}

const char* yes_no(bool b) {
  return b ? "yes" : "no";
}

// The generation GPUs' side of GRPO's split: weights, KV cache and logits of their share of a
// step's rollouts; returns whether it fits.
bool print_generation_side(const PlanOptions& o, const train::DecoderConfig& cfg, int64_t capacity,
                           int64_t rows, int64_t length) {
  namespace d = train::dist;
  const int64_t per_gpu = (rows + o.generation_gpus - 1) / o.generation_gpus;
  const auto g = d::generation_memory(cfg, per_gpu, length, param_element_bytes(o),
                                      activation_element_bytes(o));
  const bool fits = g.total() <= capacity;
  std::printf(
      "Generation GPU (%d of them): weights %s + KV cache %s (%lld rows x %lld positions) + "
      "logits %s = %s of %s: fits %s\n",
      o.generation_gpus, d::human_bytes(g.weights).c_str(), d::human_bytes(g.kv_cache).c_str(),
      static_cast<long long>(per_gpu), static_cast<long long>(length),
      d::human_bytes(g.logits).c_str(), d::human_bytes(g.total()).c_str(),
      d::human_bytes(capacity).c_str(), yes_no(fits));
  return fits;
}

// GRPO's split (the seed's vLLM on GPU 0, DeepSpeed ZeRO-2/3 on GPUs 1-7): whether the
// generation GPU(s) hold the model and the KV cache of a step's rollouts, and whether the rest
// train them under each --shard stage (a frozen reference copy beside the policy when --beta > 0).
void run_grpo_split(const PlanOptions& o, int64_t capacity) {
  namespace d = train::dist;
  const int64_t length = o.prompt_len + o.train.max_new_tokens;
  const auto cfg = plan_decoder_config(o, length, "--prompt_len + --max_new_tokens");
  PlanOptions t = o;
  t.gpus = o.gpus - o.generation_gpus;
  t.train.seq_len = length;
  t.train.batch_size = o.train.batch_size * o.train.group_size;  // a rank's rollouts, one batch
  const int64_t rows = t.train.batch_size * t.gpus;
  std::printf(
      "GRPO split on %d x %s: %d generation GPU(s), %d training GPUs; a step: %lld prompts "
      "(--batch_size %lld per training GPU) x --group_size %lld = %lld completions of up to "
      "%lld tokens (--prompt_len %lld + --max_new_tokens %lld)\n",
      o.gpus, o.gpu.c_str(), o.generation_gpus, t.gpus,
      static_cast<long long>(o.train.batch_size * t.gpus),
      static_cast<long long>(o.train.batch_size), static_cast<long long>(o.train.group_size),
      static_cast<long long>(rows), static_cast<long long>(length),
      static_cast<long long>(o.prompt_len), static_cast<long long>(o.train.max_new_tokens));
  const bool generation = print_generation_side(o, cfg, capacity, rows, length);
  const auto f = print_decoder_footprint(o, cfg, length);
  const int64_t reference = o.train.beta > 0 ? f.params * param_element_bytes(o) : 0;
  std::string fitting;
  for (const auto& [stage, peak] : print_stages(t, f, capacity)) {
    const bool fits = peak + reference <= capacity;
    if (fits) fitting += (fitting.empty() ? "--shard " : ", ") + stage;
    std::printf(
        "Training GPUs with --shard %s: %s a GPU%s of %s: fits %s\n", stage.c_str(),
        d::human_bytes(peak + reference).c_str(),
        reference > 0 ? (" (the reference model's " + d::human_bytes(reference) + ")").c_str() : "",
        d::human_bytes(capacity).c_str(), yes_no(fits));
  }
  std::printf("The split fits: %s\n",
              !generation       ? "no (the generation GPU)"
              : fitting.empty() ? "no (the training GPUs under every --shard stage planned)"
                                : ("yes, training with " + fitting).c_str());
}

// A language model: its footprint from the shape (nothing allocated; llama3-70b plans on a
// laptop), tokens per sample from --seq_len; then its device-mesh layouts.
void run_language_model_plan(const PlanOptions& o, int64_t capacity) {
  if (o.generation_gpus > 0) return run_grpo_split(o, capacity);
  const auto cfg = plan_decoder_config(o, o.train.seq_len, "--seq_len");
  const auto mq = mesh_query(o, cfg, capacity);
  const auto layouts = train::parallel::mesh_layouts(mq);  // a --tp / --pp refused before output
  print_stages(o, print_decoder_footprint(o, cfg, o.train.seq_len), capacity);
  print_mesh_plan(mq, layouts, o.gpu);
}

void run_plan(const PlanOptions& o) {
  namespace d = train::dist;
  const int64_t capacity = d::device_memory_bytes(o.gpu);
  if (capacity == 0) {
    std::string names;
    for (const auto& n : d::known_gpus()) names += (names.empty() ? "" : ", ") + n;
    throw Exception(Code::kInvalidArgument, "unknown --gpu '" + o.gpu + "'", "use one of " + names);
  }
  if (train::is_language_model(o.train.model)) return run_language_model_plan(o, capacity);
  int64_t fixed_size = 0;
  const auto* info = train::find_model(o.train.model, &fixed_size).value_or_throw();
  const int64_t size = o.train.input_size > 0
                           ? o.train.input_size
                           : (fixed_size > 0 ? fixed_size : info->default_image_size);
  train::ModelOptions mo;
  mo.num_classes = o.num_classes;
  mo.image_size = size;
  auto model = train::create_model(o.train.model, mo);
  if (o.train.precision == "fp64") model->to(torch::kDouble);
  model->train();
  // Two samples: a training-mode BatchNorm refuses one where its input has shrunk to 1x1.
  auto f = d::measure_footprint(
      *model, o.dist.shard_wrap,
      [&] {
        return model->forward(torch::randn(
            {2, 3, size, size}, o.train.precision == "fp64" ? torch::kDouble : torch::kFloat));
      },
      2);
  std::printf(
      "Model %s: %lld parameters (%s), %zu units (%s wrap), activations %s per sample "
      "(measured forward at %lldx%lld)\n",
      o.train.model.c_str(), static_cast<long long>(f.params),
      d::human_bytes(f.params * f.param_bytes).c_str(), f.units.size(), o.dist.shard_wrap.c_str(),
      d::human_bytes(f.activation_bytes_per_sample).c_str(), static_cast<long long>(size),
      static_cast<long long>(size));
  print_stages(o, f, capacity);
}

// The trainer's mesh and GRPO flags as the plan reads them: --tp or --pp not given (the trainer's
// 1) means every size that fits is searched.
void plan_mesh_flags(const CLI::App& cmd, PlanOptions& o) {
  o.tp = cmd.get_option("--tp")->count() > 0 ? o.train.tp : 0;
  o.pp = cmd.get_option("--pp")->count() > 0 ? o.train.pp : 0;
  o.allow_tp_across_nodes = o.train.allow_tp_across_nodes;
  o.generation_gpus = o.train.generation_gpus;
}

// The mesh and GRPO flags: language models only, whole nodes, and at least one training GPU.
Status check_mesh_flags(const CLI::App& cmd, const PlanOptions& o) {
  auto bad = [](std::string what, std::string hint) {
    return Status(Code::kInvalidArgument, std::move(what), std::move(hint));
  };
  const bool lm = train::is_language_model(o.train.model);
  for (const char* flag : {"--tp", "--pp", "--gpus_per_node", "--generation_gpus", "--prompt_len",
                           "--allow_tp_across_nodes"})
    if (!lm && cmd.get_option(flag)->count() > 0)
      return bad(fmt::format("{} plans a language model; {} is not one", flag, o.train.model),
                 "pass a --model that `gpulab models` lists as a language model");
  for (auto [flag, v] :
       {std::pair{"--tp", o.tp}, {"--pp", o.pp}, {"--generation_gpus", o.generation_gpus}})
    if (v < 0 || v > 65536)
      return bad(fmt::format("{} {} is out of range", flag, v),
                 fmt::format("pass {} 1 or more", flag));
  if (o.generation_gpus >= o.gpus)
    return bad(
        fmt::format("--generation_gpus {} leaves none of the {} GPUs to train", o.generation_gpus,
                    o.gpus),
        fmt::format("use --generation_gpus {} or fewer, or more --gpus", std::max(0, o.gpus - 1)));
  if (o.generation_gpus > 0 && (o.tp > 0 || o.pp > 0))
    return bad(
        "--generation_gpus plans data-parallel training (DDP or --shard); --tp and --pp "
        "are not planned with it",
        "drop --tp/--pp, or plan the mesh without --generation_gpus");
  if (lm && o.gpus > o.gpus_per_node && o.gpus % o.gpus_per_node != 0)
    return bad(
        fmt::format("--gpus {} is not a whole number of nodes of {} GPUs", o.gpus, o.gpus_per_node),
        fmt::format("use --gpus {} or {}, or set --gpus_per_node",
                    o.gpus / o.gpus_per_node * o.gpus_per_node,
                    (o.gpus / o.gpus_per_node + 1) * o.gpus_per_node));
  return ok_status();
}

// The checks `gpulab train` runs on the same rows (train::check_option_rows), then the sharding
// names, where the plan's --shard also takes "all" (its default: every stage side by side).
// A --seq_len or --input_size the command line left out becomes 0: the model's own.
Status check_plan(const CLI::App& cmd, PlanOptions& o) {
  if (auto st = train::check_option_rows(o.train); !st) return st;
  plan_mesh_flags(cmd, o);
  static const std::vector<std::string> shards = [] {
    auto v = train::dist::shard_stage_names();
    v.insert(v.begin(), "all");
    return v;
  }();
  for (const Status& st :
       {flag_one_of("shard_wrap", o.dist.shard_wrap, train::dist::wrap_policy_names()),
        flag_one_of("shard", o.dist.shard, shards)})
    if (!st) return st;
  if (auto st = check_mesh_flags(cmd, o); !st) return st;
  if (cmd.get_option("--seq_len")->count() == 0) o.train.seq_len = 0;
  if (cmd.get_option("--input_size")->count() == 0) o.train.input_size = 0;
  return train::dist::check_shard_dtypes(o.train.precision, o.dist.shard_param_dtype,
                                         o.dist.shard_reduce_dtype);
}

}  // namespace

void add_plan_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand(
      "plan",
      "per-device memory of a training job for each --shard stage (all unless one is given), and "
      "whether it fits; --batch_size is per device (language models: 1 unless given); language "
      "models also: the device-mesh layouts (TP x PP x DP x ZeRO) that fit and the one to use, or "
      "with --generation_gpus N whether GRPO's generation/training split fits");
  cmd->add_option("--gpus", o->gpus, "devices (ranks) in the job")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "h100, h200, a100, a100-40, l40s, mi300x, mi250x, rtx4090")
      ->capture_default_str();
  cmd->add_option("--vocab_size", o->vocab_size,
                  "tokens in the vocabulary (language models; default: the model's own; a model "
                  "trained on byte data: 256)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  cmd->add_option("--gpus_per_node", o->gpus_per_node,
                  "language models: GPUs in a node (tensor parallelism stays inside one)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--prompt_len", o->prompt_len,
                  "GRPO (--generation_gpus): prompt tokens, the longest (TRL's max_prompt_length)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  // The trainer's flags, declared once in its table, with the plan's defaults.
  o->train.model = "resnet50";
  o->train.batch_size = 32;
  add_train_flags(
      cmd, o->train,
      {"model", "batch_size", "seq_len", "input_size", "precision", "optimizer", "attention",
       "activation_checkpointing", "grad_accum", "group_size", "max_new_tokens", "beta", "tp", "pp",
       "allow_tp_across_nodes", "generation_gpus"});
  o->dist.shard = "all";
  add_shard_flags(cmd, o->dist, "Options");
  cmd->callback([cmd, o] {
    throw_usage_error(check_plan(*cmd, *o), cmd);
    // A language model trains with AdamW on a few long sequences per device.
    if (train::is_language_model(o->train.model)) {
      if (cmd->get_option("--optimizer")->count() == 0) o->train.optimizer = "adamw";
      // GRPO: 8 prompts a training GPU (gpulab train --task grpo's default).
      if (cmd->get_option("--batch_size")->count() == 0)
        o->train.batch_size = o->generation_gpus > 0 ? 8 : 1;
      if (o->train.seq_len <= 0) {
        const auto cfg = train::find_decoder_config(o->train.model).value_or_throw();
        o->train.seq_len = std::min<int64_t>(2048, cfg.max_positions);
      }
    }
    run_plan(*o);
  });
}

}  // namespace gpulab::cli
