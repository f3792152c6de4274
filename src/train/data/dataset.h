// The data set interface every source implements (CIFAR, MNIST/Fashion-MNIST, ImageFolder,
// synthetic). Images are uint8, C×H×W; augmentation and normalization happen later, in the
// input pipeline, so one set serves CPU workers and the on-device GPU path alike.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpulab::train {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  // Where the samples come from, for the run's header ("/usr/share/datasets/fashion-mnist");
  // "" when there is nothing to say.
  virtual std::string source() const { return {}; }
  virtual int64_t size() const = 0;
  virtual int64_t num_classes() const = 0;
  virtual std::vector<std::string> class_names() const { return {}; }
  // Shape of one stored image, {C, H, W}; a lazily decoded set reports the size it resizes to.
  virtual std::vector<int64_t> image_shape() const = 0;
  // Writes image `index` into `out` (uint8, C×H×W, contiguous) and returns its label.
  virtual int64_t get(int64_t index, torch::Tensor out) const = 0;
  // Sets that live in memory return all images (N×C×H×W uint8) and labels (N, int64) at once;
  // the GPU pipeline uploads them whole. Lazy sets (ImageFolder) return nullopt.
  virtual std::optional<std::pair<torch::Tensor, torch::Tensor>> in_memory() const {
    return std::nullopt;
  }
};

using DatasetPtr = std::shared_ptr<Dataset>;

}  // namespace gpulab::train
