// `gpulab train`: the seed's ddp-training.py flags (its command lines run unchanged) plus
// gpulab's optimization, precision, checkpoint and output options; calls train::Trainer.
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "dist_flags.h"
#include "rank_launch.h"
#include "train/data/datasets.h"
#include "train/dist/dist_options.h"
#include "train/lm_batches.h"
#include "train/model_defaults.h"
#include "train/models/recommendations.h"
#include "train/models/registry.h"
#include "train/parallel/tp_options.h"
#include "train/tasks/grpo_setup.h"
#include "train/tasks/grpo_split.h"
#include "train/tasks/task_table.h"
#include "train/trainer.h"
#include "train_flags.h"
#include "usage.h"

namespace gpulab::cli {

namespace {

// The flags on the command line, without their dashes ("learning_rate").
std::set<std::string> given_flags(const CLI::App* cmd) {
  std::set<std::string> given;
  for (const CLI::Option* opt : cmd->get_options())
    if (opt->count() > 0)
      given.insert(opt->get_name().substr(opt->get_name().find_first_not_of('-')));
  return given;
}

// The seed's "Model Recommendations" block: one use case, then its argument string.
// Then the row that applies to the chosen --model.
void print_recommendations(const std::string& model) {
  std::cout << "Model Recommendations:\n";
  for (const auto& r : train::recommendations())
    std::cout << "\n  " << r.use_case << ":\n    \"" << r.args() << "\"\n";
  auto info = train::find_model(model);
  if (!info) return;
  bool from_seed = false;
  auto r = train::recommendation_for(model, (*info)->family, &from_seed);
  std::cout << "\n  For --model " << model << (from_seed ? "" : " (its family's row)")
            << ":\n    \"" << r.args() << "\"\n";
}

}  // namespace

void add_train_command(CLI::App& app, CommandContext& ctx) {
  auto opts = std::make_shared<train::TrainOptions>();
  auto dist_opts = std::make_shared<train::dist::DistOptions>();
  auto* cmd = app.add_subcommand("train",
                                 "train an image classifier or a language model on one process or, "
                                 "with --nproc_per_node, as DDP ranks");
  add_train_flags(cmd, *opts);
  add_dist_flags(cmd, *dist_opts);
  cmd->callback([cmd, opts, dist_opts, &ctx] {
    if (opts->show_recommendations) return print_recommendations(opts->model);
    if (opts->script_options) {
      std::cout << train::script_options_text();
      return;
    }
    if (!train::is_text_dataset(opts->dataset))
      opts->dataset = train::canonical_dataset_name(opts->dataset);
    // A language model's optimizer, schedule and clipping, where the user passed none.
    train::apply_model_defaults(*opts, given_flags(cmd));
    // Every option check, once per process: in the launcher, before any rank starts (a bad
    // combination is one error, not N ranks that fail), and in each rank as it starts.
    dist_opts->precision = opts->precision;
    dist_opts->tp = static_cast<int>(opts->tp);
    dist_opts->pp = static_cast<int>(opts->pp);
    dist_opts->tp_mesh = cmd->count("--tp") > 0;
    throw_usage_error(train::dist::validate(*dist_opts), cmd);
    const int world = planned_world_size(*dist_opts);
    throw_usage_error(train::take_generation_gpu_ids(*opts), cmd);
    throw_usage_error(train::check_generation_split(*opts, *dist_opts, world), cmd);
    throw_usage_error(train::check_task_options(*opts, world - opts->generation_gpus), cmd);
    if (dist_opts->tp_mesh && opts->tp == 1)  // above 1, check_task_options checked it
      throw_usage_error(train::parallel::check_tp_mesh_options(*opts, dist_opts->shard, world),
                        cmd);
    throw_usage_error(train::check_grpo_sharding(*opts, dist_opts->shard), cmd);
    throw_usage_error(
        train::check_shard_world(*opts, dist_opts->shard, world - opts->generation_gpus), cmd);
    const PlannedNodes nodes = planned_nodes(*dist_opts);
    throw_usage_error(
        train::parallel::check_tp_placement(*opts, nodes.ranks_per_node, nodes.nnodes), cmd);
    // Asked for N ranks and not a rank yet: relaunch this command line as N ranks.
    if (auto code = launch_if_needed(*dist_opts)) {
      ctx.exit_code = *code;
      return;
    }
    // GRPO with generation ranks of its own: each rank generates or trains (grpo_split.h).
    if (opts->generation_gpus > 0) {
      ctx.exit_code = train::run_grpo_split(*opts, *dist_opts);
      return;
    }
    auto dist = train::dist::make_dist_context(*dist_opts);
    // A rank restarted by the launcher (--max_restarts) continues from the newest checkpoint.
    if (opts->resume.empty() && train::dist::restarted()) opts->resume = "auto";
    train::Trainer trainer(*opts, dist);
    // Stopped by Ctrl-C / SIGTERM (with a checkpoint): the shell's convention, 128 + signal.
    if (const int sig = trainer.run().stop_signal) ctx.exit_code = 128 + sig;
  });
}

}  // namespace gpulab::cli
