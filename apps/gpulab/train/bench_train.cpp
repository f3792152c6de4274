// `gpulab bench train`: steady-state training throughput of a model (bench::run_train_bench),
// on one process or as DDP ranks (--nproc_per_node, through the same launcher as `gpulab train`).
#include <iostream>
#include <memory>

#include "bench/train_bench.h"
#include "commands.h"
#include "core/strings.h"
#include "dataset_validator.h"
#include "json_stdout.h"
#include "train/data/datasets.h"
#include "train/dist/dist_options.h"
#include "train/lm_batches.h"
#include "train/ops/conv.h"
#include "train/train_options.h"

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
  cmd->add_option("--model", t.model, "model name (see `gpulab models`)")->capture_default_str();
  cmd->add_option("--dataset", t.dataset, "synthetic, cifar10, cifar100, mnist, imagefolder, ...")
      ->check(dataset_validator())
      ->capture_default_str();
  cmd->add_option("--data_dir", t.data_dir, "folder with the data sets")->capture_default_str();
  cmd->add_option("--device", t.device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--batch_size", t.batch_size, "batch size per process")->capture_default_str();
  cmd->add_option("--input_size", t.input_size, "side of the model input (resized on the fly)")
      ->capture_default_str();
  cmd->add_option("--seq_len", t.seq_len,
                  "tokens per sequence (language models; the JSON's "
                  "images_per_second counts sequences)")
      ->capture_default_str();
  cmd->add_option("--precision", t.precision, "fp32, tf32, bf16 or fp16")
      ->check(CLI::IsMember(train::precision_names()))
      ->capture_default_str();
  cmd->add_flag("--channels_last", t.channels_last,
                "channels-last memory format (same as --memory_format channels_last)");
  cmd->add_option("--memory_format", t.memory_format,
                  "auto (channels-last where measured faster: ResNet and MobileNet in fp32 on the "
                  "CPU), channels_last or contiguous")
      ->check(CLI::IsMember(train::memory_format_names()))
      ->capture_default_str();
  cmd->add_option("--threads", t.threads, "intra-op threads (0: all cores / local ranks)")
      ->capture_default_str();
  cmd->add_option("--num_workers", t.num_workers, "data loader threads (-1: auto)")
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "timed steps")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed steps first")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--profile", o->profile,
                  "write a Chrome trace of the timed steps here (libtorch profiler, rank 0)");
  cmd->add_option("--seed", t.seed, "random seed")->capture_default_str();
  // The optimizer decides what sharding saves (AdamW keeps two fp32 states per parameter), so
  // the sharded comparisons name it (bench/compare --cases zero).
  cmd->add_option("--optimizer", t.optimizer, "optimizer of the timed steps")
      ->check(CLI::IsMember(train::optimizer_names()))
      ->capture_default_str();
  cmd->add_option("--learning_rate", t.learning_rate, "learning rate")->capture_default_str();
  cmd->add_option("--weight_decay", t.weight_decay, "weight decay (not on norms and biases)")
      ->capture_default_str();
  auto conv_path = std::make_shared<std::string>("auto");
  cmd->add_option("--conv_path", *conv_path,
                  "convolution paths for A/B timings: auto (the faster CPU paths where they "
                  "apply), dnnl (no sgemm path) or libtorch (libtorch's own everywhere)")
      ->check(CLI::IsMember({"auto", "dnnl", "libtorch"}))
      ->capture_default_str();
  cmd->add_flag("--json", *json, "print one JSON line (rank 0)");
  train::dist::add_dist_options(cmd, *d);
  cmd->callback([o, d, json, conv_path, &ctx] {
    train::set_conv_path(*train::parse_conv_path(*conv_path));
    if (!train::is_text_dataset(o->train.dataset))
      o->train.dataset = train::canonical_dataset_name(o->train.dataset);
    if (auto code = train::dist::launch_if_needed(*d)) {
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
