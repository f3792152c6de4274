// `gpulab bench train`: steady-state training throughput of a model (bench::run_train_bench),
// on one process or as DDP ranks (--nproc_per_node, through the same launcher as `gpulab train`),
// tensor parallel with --tp, pipeline parallel with --pp.
#include <iostream>
#include <memory>

#include "bench/train_bench.h"
#include "commands.h"
#include "dist_flags.h"
#include "json_stdout.h"
#include "profile_validator.h"
#include "rank_launch.h"
#include "train/data/datasets.h"
#include "train/lm_batches.h"
#include "train/parallel/tp_options.h"
#include "train_flags.h"
#include "usage.h"

namespace gpulab::cli {

void add_bench_train(CLI::App* bench, CommandContext& ctx) {
  auto o = std::make_shared<bench::TrainBenchOptions>();
  auto d = std::make_shared<train::dist::DistOptions>();
  auto json = std::make_shared<bool>(false);
  auto& t = o->train;
  // The reference script's settings (bench/reference/train_ref.py): SGD lr 0.1, momentum 0.9,
  // weight decay 5e-4, random horizontal flips, synthetic data unless a data set is named;
  // --optimizer and its rates can be changed.
  t.dataset = "synthetic";
  t.input_size = 32;
  t.learning_rate = 0.1;
  t.weight_decay = 5e-4;
  t.augment = true;
  t.device = "auto";
  auto* cmd = bench->add_subcommand(
      "train", "training throughput after warm-up: images/s, data vs compute time, peak memory");
  add_train_flags(cmd, t,
                  {"model",
                   "dataset",
                   "data_dir",
                   "device",
                   "batch_size",
                   "input_size",
                   "seq_len",
                   "attention",
                   "precision",
                   "channels_last",
                   "memory_format",
                   "threads",
                   "num_workers",
                   "cpu_kernels",
                   "tp",
                   "sequence_parallel",
                   "pp",
                   "pp_schedule",
                   "pp_virtual_stages",
                   "pp_micro_batches"});
  cmd->add_option("--steps", o->steps, "timed steps")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--profile", o->profile,
                  "write a Chrome trace of the timed steps here (libtorch's Kineto profiler, a "
                  "GPU's kernels too; rank 0)")
      ->check(profile_validator());
  // The optimizer decides what sharding saves (AdamW keeps two fp32 states per parameter), so
  // the sharded comparisons name it (bench/compare --cases zero); clipping is part of a reference
  // step (make gpu-check's llama-1b row clips at 1.0, as transformers' side does).
  add_train_flags(cmd, t, {"seed", "optimizer", "learning_rate", "weight_decay", "clip_grad"});
  cmd->add_flag("--json", *json, "print one JSON line (rank 0)");
  add_dist_flags(cmd, *d);
  cmd->callback([cmd, o, d, json, &ctx] {
    if (!train::is_text_dataset(o->train.dataset))
      o->train.dataset = train::canonical_dataset_name(o->train.dataset);
    // Every option check, once per process: before any rank starts, and in each rank.
    d->precision = o->train.precision;
    d->tp = static_cast<int>(o->train.tp);
    d->tp_mesh = cmd->count("--tp") > 0;
    d->pp = static_cast<int>(o->train.pp);
    throw_usage_error(train::dist::validate(*d), cmd);
    const int world = planned_world_size(*d);
    throw_usage_error(bench::validate(*o, world), cmd);
    if (d->tp_mesh && o->train.tp == 1)  // above 1, bench::validate checked it
      throw_usage_error(train::parallel::check_tp_mesh_options(o->train, d->shard, world), cmd);
    const PlannedNodes nodes = planned_nodes(*d);
    throw_usage_error(
        train::parallel::check_tp_placement(o->train, nodes.ranks_per_node, nodes.nnodes), cmd);
    if (auto code = launch_if_needed(*d)) {
      ctx.exit_code = *code;
      return;
    }
    JsonStdout out(*json);
    d->say_hello = false;
    auto dist = train::dist::make_dist_context(*d);
    auto r = bench::run_train_bench(*o, dist);
    if (!dist->is_main()) return;
    if (*json)
      out.emit(r.to_json().dump());
    else
      std::cout << r.summary() << std::flush;
  });
}

}  // namespace gpulab::cli
