// A model's tensors handed over one at a time, in name order: what writes the final weights of a
// model spread over ranks (each tensor joined from its pieces as it is written, so no rank holds
// the whole model) and what joins a checkpoint's pieces on the way to a file.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>

#include "train/weights/safetensors.h"

namespace gpulab::train {

class TensorStream {
 public:
  virtual ~TensorStream() = default;
  // Every tensor's name, shape and dtype (meta tensors will do), in the order take() hands them.
  virtual const StateDict& layout() const = 0;
  // Tensor `name`, the layout's next. Where the tensors are spread over ranks, every rank calls
  // it for every name in order (a collective): the rank that writes gets the tensor, the others
  // an undefined one.
  virtual torch::Tensor take(const std::string& name) = 0;
};

// Tensors at hand (one process's model, a file read whole).
class StateDictStream : public TensorStream {
 public:
  explicit StateDictStream(StateDict tensors) : tensors_(std::move(tensors)) {}
  const StateDict& layout() const override { return tensors_; }
  torch::Tensor take(const std::string& name) override { return tensors_.at(name); }

 private:
  StateDict tensors_;
};

// Takes every tensor and drops it: a rank's part in a collective stream another rank writes.
inline void drain(TensorStream& stream) {
  for (const auto& [name, t] : stream.layout()) (void)stream.take(name);
}

}  // namespace gpulab::train
