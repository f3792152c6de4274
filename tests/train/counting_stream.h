// A stream over tensors at hand that counts what it hands over: a writer that fails must still
// take every tensor (model-parallel ranks send them), which the writers' tests check with it.
#pragma once

#include <cstddef>
#include <string>

#include "train/weights/tensor_stream.h"

namespace gpulab::train::testing {

class CountingStream : public StateDictStream {
 public:
  using StateDictStream::StateDictStream;
  torch::Tensor take(const std::string& name) override {
    ++taken;
    return StateDictStream::take(name);
  }
  size_t taken = 0;
};

}  // namespace gpulab::train::testing
