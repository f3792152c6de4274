// `gpulab train`: the seed's ddp-training.py flags (its command lines run unchanged) plus
// gpulab's optimization, precision, checkpoint and output options; calls train::Trainer.
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "core/strings.h"
#include "dataset_validator.h"
#include "train/data/datasets.h"
#include "train/dist/dist_options.h"
#include "train/lm_batches.h"
#include "train/model_defaults.h"
#include "train/models/recommendations.h"
#include "train/models/registry.h"
#include "train/trainer.h"

namespace gpulab::cli {

namespace {

using train::TrainOptions;

void add_options(CLI::App* cmd, TrainOptions& o) {
  auto member = [](const std::vector<std::string>& v) { return CLI::IsMember(v); };
  // The seed's flags.
  cmd->add_option("--model", o.model, "model name (see `gpulab models`)")->capture_default_str();
  cmd->add_option("--learning_rate", o.learning_rate,
                  "base learning rate (language models: 3e-3 up to 512 wide, 6e-4 up to 1024, "
                  "else 3e-4)")
      ->capture_default_str();
  cmd->add_option("--optimizer", o.optimizer,
                  "sgd, adam, adamw or rmsprop (language models: adamw, cosine schedule with 5% "
                  "warm-up, clip_grad 1.0, weight_decay 0.1 unless passed)")
      ->check(member(train::optimizer_names()))
      ->capture_default_str();
  cmd->add_option("--batch_size", o.batch_size,
                  "batch size per process (global with --batch_size_scaled)")
      ->capture_default_str();
  cmd->add_flag("--batch_size_scaled", o.batch_size_scaled,
                "treat --batch_size as the global batch, split between processes");
  cmd->add_option("--num_epochs", o.num_epochs, "epochs to train")->capture_default_str();
  cmd->add_option("--normalize", o.normalize, "imagenet, neg_one_one or zero_one")
      ->check(member(train::normalize_names()))
      ->capture_default_str();
  cmd->add_option("--dataset", o.dataset,
                  "cifar10, cifar100, mnist, fashion-mnist, imagefolder, synthetic; text or "
                  "synthetic-text for language models")
      ->check(dataset_validator())
      ->capture_default_str();
  cmd->add_option("--log_every", o.log_every, "evaluate on the test set every N epochs")
      ->capture_default_str();
  cmd->add_option("--weight_decay", o.weight_decay,
                  "weight decay (not applied to norms and biases)")
      ->capture_default_str();
  cmd->add_flag("--show_recommendations", o.show_recommendations,
                "print model recommendations and exit");
  cmd->add_flag("--script_options", o.script_options, "print example command lines and exit");
  // Data and outputs.
  cmd->add_option("--data_dir", o.data_dir, "folder with the data sets")->capture_default_str();
  cmd->add_option("--output_dir", o.output_dir, "run folder (default runs/<model>-<dataset>)");
  cmd->add_option("--init_weights", o.init_weights,
                  "start from these weights (safetensors, Hugging Face / torchvision names) "
                  "instead of a random initialization");
  cmd->add_option("--input_size", o.input_size, "side of the square model input")
      ->capture_default_str();
  cmd->add_flag("--augment", o.augment, "random crop and horizontal flip for training");
  cmd->add_option("--seq_len", o.seq_len, "tokens per training window (language models)")
      ->capture_default_str();
  cmd->add_flag("--activation_checkpointing", o.activation_checkpointing,
                "recompute each transformer block in the backward pass (less memory)");
  cmd->add_option("--num_workers", o.num_workers, "data loader threads (-1: auto)")
      ->capture_default_str();
  cmd->add_option("--device", o.device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--threads", o.threads, "intra-op threads (0: all cores / local ranks)")
      ->capture_default_str();
  cmd->add_option("--resume", o.resume, "auto (newest complete checkpoint) or a checkpoint path");
  cmd->add_option("--keep_checkpoints", o.keep_checkpoints, "complete checkpoints to keep")
      ->capture_default_str();
  cmd->add_flag("--no_checkpoints", o.no_checkpoints, "write no checkpoints");
  cmd->add_flag("--no_report", o.no_report, "write no HTML report");
  // Optimization.
  cmd->add_option("--momentum", o.momentum, "momentum (sgd, rmsprop)")->capture_default_str();
  cmd->add_flag("--nesterov", o.nesterov, "Nesterov momentum (sgd)");
  cmd->add_option("--lr_schedule", o.lr_schedule, "none, step or cosine")
      ->check(member(train::schedule_names()))
      ->capture_default_str();
  cmd->add_option("--warmup_epochs", o.warmup_epochs, "linear warmup, per step (fractions allowed)")
      ->capture_default_str();
  cmd->add_option("--step_size", o.step_size, "epochs between decays (step schedule)")
      ->capture_default_str();
  cmd->add_option("--gamma", o.gamma, "decay factor (step schedule)")->capture_default_str();
  cmd->add_option("--label_smoothing", o.label_smoothing, "label smoothing in [0, 1)")
      ->capture_default_str();
  cmd->add_option("--clip_grad", o.clip_grad, "clip the global gradient norm (0: off)")
      ->capture_default_str();
  cmd->add_option("--grad_accum", o.grad_accum, "micro-batches per optimizer step")
      ->capture_default_str();
  cmd->add_option("--precision", o.precision,
                  "fp32, tf32, bf16, fp16 (GPU only) or fp64 (a numerics check: model, inputs and "
                  "loss in float64)")
      ->check(member(train::precision_names()))
      ->capture_default_str();
  cmd->add_flag("--channels_last", o.channels_last,
                "channels-last memory format (same as --memory_format channels_last)");
  cmd->add_option("--memory_format", o.memory_format,
                  "auto (channels-last where measured faster: ResNet and MobileNet in fp32 on the "
                  "CPU), channels_last or contiguous")
      ->check(member(train::memory_format_names()))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "random seed (weights, data order, augmentation)")
      ->capture_default_str();
  cmd->add_flag("--deterministic", o.deterministic, "deterministic algorithms only");
  // Small runs.
  cmd->add_option("--subset", o.subset, "use only the first N train and test images (0: all)")
      ->capture_default_str();
  cmd->add_option("--limit_train_batches", o.limit_train_batches, "batches per epoch (0: all)");
  cmd->add_option("--limit_eval_batches", o.limit_eval_batches, "test batches (0: all)");
  cmd->add_option("--max_steps", o.max_steps, "stop after N optimizer steps (0: no limit)");
}

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
  auto opts = std::make_shared<TrainOptions>();
  auto dist_opts = std::make_shared<train::dist::DistOptions>();
  auto* cmd = app.add_subcommand("train",
                                 "train an image classifier or a language model on one process or, "
                                 "with --nproc_per_node, as DDP ranks");
  add_options(cmd, *opts);
  train::dist::add_dist_options(cmd, *dist_opts);
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
    // Bad options fail here, once, before any rank starts.
    train::check_train_options(*opts, train::dist::planned_world_size(*dist_opts));
    // Asked for N ranks and not a rank yet: relaunch this command line as N ranks.
    if (auto code = train::dist::launch_if_needed(*dist_opts)) {
      ctx.exit_code = *code;
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
