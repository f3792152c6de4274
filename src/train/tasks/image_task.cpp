// Image classification's data, model, loss, evaluation, header and outputs for the trainer.
#include "train/tasks/image_task.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "train/models/registry.h"
#include "train/tasks/class_metrics.h"
#include "train/weights_export.h"

namespace gpulab::train {

// Data sets, samplers and loaders (the samplers come from the distributed context).
int64_t ImageTask::open_data() {
  const TrainOptions& o = env_.opts;
  DatasetOptions dopts;
  dopts.image_size = o.input_size;
  dopts.seed = static_cast<uint64_t>(o.seed);
  train_set_ = open_dataset(o.dataset, o.data_dir, Split::kTrain, dopts);
  test_set_ = open_dataset(o.dataset, o.data_dir, Split::kTest, dopts);
  LoaderOptions lo;
  lo.batch_size = env_.batch_per_process;
  lo.num_workers = static_cast<int>(o.num_workers);
  // Auto: loader threads share the cores with the other ranks on this host, like intra-op ones.
  if (lo.num_workers < 0) lo.num_workers = auto_num_workers(env_.dist.local_world_size);
  lo.device = env_.device;
  lo.seed = static_cast<uint64_t>(o.seed);
  lo.transform.input_size = o.input_size;
  lo.transform.normalize = parse_normalization(o.normalize);
  lo.transform.augment = o.augment;
  const auto limit = [&](int64_t n) { return o.subset > 0 ? std::min(n, o.subset) : n; };
  train_loader_ = std::make_unique<DataLoader>(
      train_set_, env_.dist.train_sampler(limit(train_set_->size()), lo.seed), lo);
  LoaderOptions eo = lo;
  eo.transform.augment = false;
  test_loader_ =
      std::make_unique<DataLoader>(test_set_, env_.dist.eval_sampler(limit(test_set_->size())), eo);
  train_loader_->start_epoch(0);  // to learn the epoch length
  const int64_t batches = train_loader_->batches_per_epoch();
  if (batches == 0)
    throw Exception(Code::kInvalidArgument, "the training set gives no batch on this process",
                    "lower --batch_size or raise --subset");
  return batches;
}

// The name and its input size were checked with the options (check_train_options).
ClassifierPtr ImageTask::build_model() {
  ModelOptions mo;
  mo.num_classes = train_set_->num_classes();
  mo.image_size = env_.opts.input_size;
  return create_model(env_.opts.model, mo);
}

MemoryFormatChoice ImageTask::memory_format(Classifier& model) {
  memory_format_ = choose_memory_format(env_.opts, env_.device,
                                        find_model(env_.opts.model).value_or_throw()->family);
  if (memory_format_.channels_last) make_channels_last(model);
  return memory_format_;
}

void ImageTask::start_epoch(int64_t epoch, int64_t skip) {
  train_loader_->start_epoch(epoch);
  train_loader_->reset_stats();
  for (int64_t b = 0; b < skip; ++b) (void)train_loader_->next();
}

torch::Tensor ImageTask::to_input(const torch::Tensor& images) const {
  torch::Tensor x = images.to(env_.compute_dtype);
  return memory_format_.channels_last ? x.contiguous(torch::MemoryFormat::ChannelsLast) : x;
}

std::optional<TaskBatch> ImageTask::next_batch(int64_t /*index*/) {  // the loader's order
  auto batch = train_loader_->next();
  if (!batch) return std::nullopt;
  return TaskBatch{to_input(batch->images), batch->labels, {}};
}

StepLoss ImageTask::loss(const torch::Tensor& outputs, const TaskBatch& batch) const {
  return class_loss(outputs, batch.targets, env_);
}

void ImageTask::evaluate(Classifier& model, EpochRecord& rec) {
  test_loader_->start_epoch(0);
  evaluate_classes(
      model,
      [&]() -> std::optional<TaskBatch> {
        auto batch = test_loader_->next();
        if (!batch) return std::nullopt;
        return TaskBatch{to_input(batch->images), batch->labels, {}};
      },
      env_, rec);
}

std::vector<std::string> ImageTask::header(const RunFacts& facts) const {
  const TrainOptions& o = env_.opts;
  const DistContext& d = env_.dist;
  std::vector<std::string> lines;
  if (o.num_workers < 0)
    lines.push_back(fmt::format("Auto-detected num_workers: {}", train_loader_->num_workers()));
  lines.push_back(fmt::format("Training {} on {} dataset", o.model, train_set_->name()));
  if (const std::string from = train_set_->source(); !from.empty())
    lines.push_back("Data: " + from);
  // With --subset the run trains and tests on the first N images: those are the counts shown.
  const auto used = [&](int64_t n) { return o.subset > 0 ? std::min(n, o.subset) : n; };
  const auto& shape = train_set_->image_shape();
  lines.push_back(
      fmt::format("Input size: {}x{}, Classes: {} (stored {}x{}x{}, {} train / {} test images{})",
                  o.input_size, o.input_size, train_set_->num_classes(), shape[0], shape[1],
                  shape[2], used(train_set_->size()), used(test_set_->size()),
                  o.subset > 0 ? fmt::format(" with --subset {}, of {} / {}", o.subset,
                                             train_set_->size(), test_set_->size())
                               : ""));
  lines.push_back(fmt::format(
      "Using {} optimizer with lr={:g}, weight_decay={:g}{}", o.optimizer, o.learning_rate,
      o.weight_decay,
      o.lr_schedule == "none"
          ? std::string()
          : fmt::format(", schedule={} (warmup {} steps)", o.lr_schedule, facts.warmup_steps)));
  if (!o.init_weights.empty()) lines.push_back("Initial weights: " + o.init_weights);
  lines.push_back(fmt::format(
      "Batch size: {} (per process), {} steps per epoch{}", env_.batch_per_process,
      facts.steps_per_epoch, o.grad_accum > 1 ? fmt::format(", grad_accum {}", o.grad_accum) : ""));
  lines.push_back(fmt::format("Workers: {}, Backend: {}, World size: {}",
                              train_loader_->num_workers(), d.backend(), d.world_size));
  lines.push_back(fmt::format(
      "Device: {}, Threads: {}{}, Precision: {}{}", env_.device.str(), env_.threads,
      o.threads <= 0 && d.local_world_size > 1
          ? fmt::format(" per rank (cores split between {} local ranks)", d.local_world_size)
          : "",
      o.precision, memory_format_.channels_last ? ", channels_last" : ""));
  lines.push_back(
      fmt::format("Memory format: {} ({})", memory_format_.name, memory_format_.reason));
  lines.push_back("Normalization: " + o.normalize);
  return lines;
}

// Fewer pixels when the model takes smaller inputs than --input_size; else less data or a GPU.
std::string ImageTask::long_run_hint() const {
  const TrainOptions& o = env_.opts;
  const auto& shape = train_set_->image_shape();
  const int64_t stored = std::max(shape[1], shape[2]);
  const int64_t smaller =
      std::max<int64_t>({find_model(o.model).value_or_throw()->min_image_size, stored, 32});
  if (smaller >= o.input_size) return "--subset N, fewer --num_epochs or a GPU shortens it";
  return fmt::format(
      "--input_size {} (now {}; the images are stored at {}x{}) has {:.0f}x fewer pixels to "
      "compute on",
      smaller, o.input_size, shape[1], shape[2],
      std::pow(static_cast<double>(o.input_size) / static_cast<double>(smaller), 2.0));
}

std::vector<std::string> ImageTask::write_weights(Classifier& model, TensorStream& /*state*/,
                                                  const std::filesystem::path& dir) const {
  const auto file = dir / "model.safetensors";
  export_weights(model, file);
  return {"Weights: " + file.string()};
}

}  // namespace gpulab::train
