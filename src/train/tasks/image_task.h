// Image classification as a training task: an image data set through the DataLoader (a
// shuffled shard per rank, an exact split of the test set), a model of the zoo in the memory
// format chosen for it, cross-entropy on labels, top-1 / top-5 on the test set.
#pragma once

#include <memory>

#include "train/data/datasets.h"
#include "train/data/loader.h"
#include "train/tasks/train_task.h"

namespace gpulab::train {

class ImageTask : public TrainTask {
 public:
  explicit ImageTask(const TaskEnv& env) : env_(env) {}

  int64_t open_data() override;
  ClassifierPtr build_model() override;
  MemoryFormatChoice memory_format(Classifier& model) override;
  void start_epoch(int64_t epoch, int64_t skip) override;
  std::optional<TaskBatch> next_batch(int64_t index) override;
  void abandon_epoch() override { train_loader_->abandon_epoch(); }
  StepLoss loss(const torch::Tensor& outputs, const TaskBatch& batch) const override;
  double data_wait_seconds() const override { return train_loader_->data_wait_seconds(); }
  void evaluate(Classifier& model, EpochRecord& rec) override;
  std::vector<std::string> header(const RunFacts& facts) const override;
  std::string unit() const override { return "img"; }
  std::string long_run_hint() const override;
  std::vector<std::string> write_weights(Classifier& model, TensorStream& state,
                                         const std::filesystem::path& dir) const override;
  std::string data_name() const override { return train_set_->name(); }
  std::string input_fact() const override { return std::to_string(env_.opts.input_size); }

 private:
  torch::Tensor to_input(const torch::Tensor& images) const;  // dtype and layout of the model

  TaskEnv env_;
  DatasetPtr train_set_, test_set_;
  std::unique_ptr<DataLoader> train_loader_, test_loader_;
  MemoryFormatChoice memory_format_;
};

}  // namespace gpulab::train
