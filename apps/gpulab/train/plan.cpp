// `gpulab plan --model M --gpus N [--gpu h100|mi300x|...] [--shard S] [--batch_size B]
// [--precision P] [--activation_checkpointing]`: per-device memory by part for each shard stage,
// whether it fits, the largest batch that fits, and the bytes each device sends per step.
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
};

// The per-stage table: memory by part at the step's peak, fit, largest batch, traffic.
void print_stages(const PlanOptions& o, const train::dist::ModelFootprint& f, int64_t capacity) {
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
  for (const auto& name : d::shard_stage_names()) {
    if (o.dist.shard != "all" && o.dist.shard != name) continue;
    d::PlanQuery q;
    q.stage = d::parse_shard_stage(name);
    q.world = o.gpus;
    q.batch_size = o.train.batch_size;
    q.optimizer_states = o.train.optimizer == "adam" || o.train.optimizer == "adamw" ? 2 : 1;
    q.activation_scale = o.train.precision == "bf16" || o.train.precision == "fp16" ? 0.5 : 1.0;
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
}

// A language model: its footprint from the shape (nothing allocated; llama3-70b plans on a
// laptop), tokens per sample from --seq_len.
void run_language_model_plan(const PlanOptions& o, int64_t capacity) {
  namespace d = train::dist;
  auto cfg = train::find_decoder_config(o.train.model).value_or_throw();
  if (o.vocab_size > 0) cfg.vocab_size = o.vocab_size;
  if (o.train.seq_len > cfg.max_positions)
    throw Exception(Code::kInvalidArgument,
                    fmt::format("--seq_len {} is beyond {}'s {} positions", o.train.seq_len,
                                cfg.name, cfg.max_positions),
                    fmt::format("pass --seq_len {} or less", cfg.max_positions));
  const auto f = d::decoder_footprint(cfg, o.train.seq_len, o.train.attention == "gpulab",
                                      o.train.precision == "fp64" ? 8 : 4);
  std::printf(
      "Model %s: %lld parameters (%s), %zu units (one per block + the root), activations %s "
      "per sequence of %lld tokens, %s attention (fitted on probe models of this "
      "implementation)\n",
      cfg.name.c_str(), static_cast<long long>(f.params),
      d::human_bytes(f.params * f.param_bytes).c_str(), f.units.size(),
      d::human_bytes(f.activation_bytes_per_sample).c_str(),
      static_cast<long long>(o.train.seq_len), o.train.attention.c_str());
  print_stages(o, f, capacity);
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

// The checks `gpulab train` runs on the same rows (train::check_option_rows), then the sharding
// names, where the plan's --shard also takes "all" (its default: every stage side by side).
// A --seq_len or --input_size the command line left out becomes 0: the model's own.
Status check_plan(const CLI::App& cmd, PlanOptions& o) {
  if (auto st = train::check_option_rows(o.train); !st) return st;
  static const std::vector<std::string> shards = [] {
    auto v = train::dist::shard_stage_names();
    v.insert(v.begin(), "all");
    return v;
  }();
  for (const Status& st :
       {flag_one_of("shard_wrap", o.dist.shard_wrap, train::dist::wrap_policy_names()),
        flag_one_of("shard", o.dist.shard, shards)})
    if (!st) return st;
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
      "whether it fits; --batch_size is per device (language models: 1 unless given)");
  cmd->add_option("--gpus", o->gpus, "devices (ranks) in the job")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--gpu", o->gpu, "h100, h200, a100, a100-40, l40s, mi300x, mi250x, rtx4090")
      ->capture_default_str();
  cmd->add_option("--vocab_size", o->vocab_size,
                  "tokens in the vocabulary (language models; default: the model's own; a model "
                  "trained on byte data: 256)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  // The trainer's flags, declared once in its table, with the plan's defaults.
  o->train.model = "resnet50";
  o->train.batch_size = 32;
  add_train_flags(cmd, o->train,
                  {"model", "batch_size", "seq_len", "input_size", "precision", "optimizer",
                   "attention", "activation_checkpointing"});
  o->dist.shard = "all";
  add_shard_flags(cmd, o->dist, "Options");
  cmd->callback([cmd, o] {
    throw_usage_error(check_plan(*cmd, *o), cmd);
    // A language model trains with AdamW on a few long sequences per device.
    if (train::is_language_model(o->train.model)) {
      if (cmd->get_option("--optimizer")->count() == 0) o->train.optimizer = "adamw";
      if (cmd->get_option("--batch_size")->count() == 0) o->train.batch_size = 1;
      if (o->train.seq_len <= 0) {
        const auto cfg = train::find_decoder_config(o->train.model).value_or_throw();
        o->train.seq_len = std::min<int64_t>(2048, cfg.max_positions);
      }
    }
    run_plan(*o);
  });
}

}  // namespace gpulab::cli
