// A data set held whole in memory as N×C×H×W uint8 images and int64 labels: what the CIFAR and
// IDX readers produce, and what the on-device pipeline uploads.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "train/data/dataset.h"

namespace gpulab::train {

class InMemoryDataset : public Dataset {
 public:
  InMemoryDataset(std::string name, torch::Tensor images, torch::Tensor labels, int64_t num_classes,
                  std::vector<std::string> class_names);

  std::string name() const override { return name_; }
  std::string source() const override { return source_; }
  void set_source(std::string source) { source_ = std::move(source); }
  int64_t size() const override { return images_.size(0); }
  int64_t num_classes() const override { return num_classes_; }
  std::vector<std::string> class_names() const override { return class_names_; }
  std::vector<int64_t> image_shape() const override;
  int64_t get(int64_t index, torch::Tensor out) const override;
  std::optional<std::pair<torch::Tensor, torch::Tensor>> in_memory() const override {
    return std::make_pair(images_, labels_);
  }

 private:
  std::string name_;
  std::string source_;
  torch::Tensor images_;
  torch::Tensor labels_;
  int64_t num_classes_;
  std::vector<std::string> class_names_;
};

}  // namespace gpulab::train
