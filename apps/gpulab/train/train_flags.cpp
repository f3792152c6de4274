// The training flags, one row each: the seed's ddp-training.py flags first, then gpulab's.
#include "train_flags.h"

#include "base/flag_table.h"
#include "dataset_validator.h"

namespace gpulab::cli {

namespace {

using train::TrainOptions;
using TrainFlag = FlagRow<TrainOptions>;

// NOLINTBEGIN(readability-function-size): a table, one row per flag.
const std::vector<TrainFlag>& train_flag_table() {
  static const std::vector<TrainFlag> table = {
      // The seed's flags.
      {"model",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--model", o.model, "model name (see `gpulab models`)")
             ->capture_default_str();
       }},
      {"learning_rate",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--learning_rate", o.learning_rate,
                          "base learning rate (language models: 3e-3 up to 512 wide, 6e-4 up to "
                          "1024, else 3e-4)")
             ->capture_default_str();
       }},
      {"optimizer",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--optimizer", o.optimizer,
                          "sgd, adam, adamw or rmsprop (language models: adamw, cosine schedule "
                          "with 5% warm-up, clip_grad 1.0, weight_decay 0.1 unless passed)")
             ->capture_default_str();
       }},
      {"batch_size",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--batch_size", o.batch_size,
                          "batch size per process (global with --batch_size_scaled)")
             ->capture_default_str();
       }},
      {"batch_size_scaled",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--batch_size_scaled", o.batch_size_scaled,
                            "treat --batch_size as the global batch, split between processes");
       }},
      {"num_epochs",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--num_epochs", o.num_epochs, "epochs to train")
             ->capture_default_str();
       }},
      {"normalize",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--normalize", o.normalize, "imagenet, neg_one_one or zero_one")
             ->capture_default_str();
       }},
      {"dataset",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--dataset", o.dataset,
                          "cifar10, cifar100, mnist, fashion-mnist, imagefolder, synthetic; text "
                          "or synthetic-text for language models")
             ->check(dataset_validator())
             ->capture_default_str();
       }},
      {"log_every",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--log_every", o.log_every, "evaluate on the test set every N epochs")
             ->capture_default_str();
       }},
      {"weight_decay",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--weight_decay", o.weight_decay,
                          "weight decay (not applied to norms and biases)")
             ->capture_default_str();
       }},
      {"show_recommendations",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--show_recommendations", o.show_recommendations,
                            "print model recommendations and exit");
       }},
      {"script_options",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--script_options", o.script_options,
                            "print example command lines and exit");
       }},
      // Data and outputs.
      {"data_dir",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--data_dir", o.data_dir, "folder with the data sets")
             ->capture_default_str();
       }},
      {"output_dir",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--output_dir", o.output_dir,
                              "run folder (default runs/<model>-<dataset>)");
       }},
      {"init_weights",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--init_weights", o.init_weights,
                              "start from these weights (safetensors, Hugging Face / torchvision "
                              "names) instead of a random initialization");
       }},
      {"input_size",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--input_size", o.input_size, "side of the square model input")
             ->capture_default_str();
       }},
      {"augment",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--augment", o.augment, "random crop and horizontal flip for training");
       }},
      {"seq_len",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--seq_len", o.seq_len,
                          "tokens per training window (language models; bench train's "
                          "images_per_second counts sequences)")
             ->capture_default_str();
       }},
      {"activation_checkpointing",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--activation_checkpointing", o.activation_checkpointing,
                            "recompute each transformer block in the backward pass (less memory)");
       }},
      {"attention",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--attention", o.attention,
                          "language models: sdpa (at::scaled_dot_product_attention, as on a GPU) "
                          "or gpulab (gpulab's fused CPU kernel in fp32/fp64/bf16, for A/B "
                          "timings)")
             ->capture_default_str();
       }},
      {"num_workers",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--num_workers", o.num_workers, "data loader threads (-1: auto)")
             ->capture_default_str();
       }},
      {"device",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--device", o.device, "auto, cpu, cuda or cuda:N")
             ->capture_default_str();
       }},
      {"cpu_kernels",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--cpu_kernels", o.cpu_kernels,
                          "on: gpulab's CPU kernels where they apply (RMSNorm, SwiGLU, bf16 "
                          "products on the fp32 GEMM); off: libtorch's ops (A/B timings)")
             ->capture_default_str();
       }},
      {"threads",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--threads", o.threads, "intra-op threads (0: all cores / local ranks)")
             ->capture_default_str();
       }},
      {"resume",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--resume", o.resume,
                              "auto (newest complete checkpoint) or a checkpoint path");
       }},
      {"keep_checkpoints",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--keep_checkpoints", o.keep_checkpoints, "complete checkpoints to keep")
             ->capture_default_str();
       }},
      {"no_checkpoints",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--no_checkpoints", o.no_checkpoints, "write no checkpoints");
       }},
      {"no_report",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--no_report", o.no_report, "write no HTML report");
       }},
      // Optimization.
      {"momentum",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--momentum", o.momentum, "momentum (sgd, rmsprop)")
             ->capture_default_str();
       }},
      {"nesterov",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--nesterov", o.nesterov, "Nesterov momentum (sgd)");
       }},
      {"lr_schedule",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--lr_schedule", o.lr_schedule, "none, step or cosine")
             ->capture_default_str();
       }},
      {"warmup_epochs",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--warmup_epochs", o.warmup_epochs,
                          "linear warmup, per step (fractions allowed)")
             ->capture_default_str();
       }},
      {"step_size",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--step_size", o.step_size, "epochs between decays (step schedule)")
             ->capture_default_str();
       }},
      {"gamma",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--gamma", o.gamma, "decay factor (step schedule)")
             ->capture_default_str();
       }},
      {"label_smoothing",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--label_smoothing", o.label_smoothing, "label smoothing in [0, 1)")
             ->capture_default_str();
       }},
      {"clip_grad",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--clip_grad", o.clip_grad, "clip the global gradient norm (0: off)")
             ->capture_default_str();
       }},
      {"grad_accum",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--grad_accum", o.grad_accum, "micro-batches per optimizer step")
             ->capture_default_str();
       }},
      {"precision",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--precision", o.precision,
                          "fp32, tf32, bf16, fp16 (GPU only) or fp64 (a numerics check: model, "
                          "inputs and loss in float64)")
             ->capture_default_str();
       }},
      {"channels_last",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--channels_last", o.channels_last,
                            "channels-last memory format (same as --memory_format channels_last)");
       }},
      {"memory_format",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--memory_format", o.memory_format,
                          "auto (channels-last where measured faster: ResNet and MobileNet in "
                          "fp32 on the CPU), channels_last or contiguous")
             ->capture_default_str();
       }},
      {"seed",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--seed", o.seed, "random seed (weights, data order, augmentation)")
             ->capture_default_str();
       }},
      {"deterministic",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_flag("--deterministic", o.deterministic, "deterministic algorithms only");
       }},
      // Small runs.
      {"subset",
       [](CLI::App* c, TrainOptions& o) {
         return c
             ->add_option("--subset", o.subset,
                          "use only the first N train and test images (0: all)")
             ->capture_default_str();
       }},
      {"limit_train_batches",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--limit_train_batches", o.limit_train_batches,
                              "batches per epoch (0: all)");
       }},
      {"limit_eval_batches",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--limit_eval_batches", o.limit_eval_batches,
                              "test batches (0: all)");
       }},
      {"max_steps",
       [](CLI::App* c, TrainOptions& o) {
         return c->add_option("--max_steps", o.max_steps,
                              "stop after N optimizer steps (0: no limit)");
       }},
  };
  return table;
}
// NOLINTEND(readability-function-size)

}  // namespace

void add_train_flags(CLI::App* cmd, TrainOptions& o, const std::vector<std::string>& only) {
  add_flag_rows(cmd, o, train_flag_table(), only);
}

}  // namespace gpulab::cli
