// The on-device input pipeline for small in-memory sets (CIFAR, MNIST): the whole uint8 set is
// uploaded once, and each batch is gathered, cropped, flipped, resized and normalized with tensor
// ops on the device. It draws the same per-sample decisions as the CPU workers (draw_augment),
// so both paths give the same batches; on a CPU device it runs the same ops (tests use that).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "train/data/dataset.h"
#include "train/data/transforms.h"

namespace gpulab::train {

class GpuPipeline {
 public:
  // Uploads dataset->in_memory() to `device`; throws kInvalidArgument for a lazy set.
  GpuPipeline(const Dataset& dataset, torch::Device device, TransformOptions transform,
              uint64_t seed);

  // Builds the batch of the given sample indices for `epoch`: images float N×C×S×S and
  // labels int64 N, both on the device.
  std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<int64_t>& indices,
                                                int64_t epoch) const;

  // True when a set this size (bytes of uint8 data) is worth keeping on the device.
  static bool suitable(const Dataset& dataset);

 private:
  torch::Device device_;
  TransformOptions transform_;
  uint64_t seed_;
  torch::Tensor images_;  // N×C×H×W uint8 on the device
  torch::Tensor labels_;  // N int64 on the device
};

}  // namespace gpulab::train
