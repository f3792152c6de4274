// A profile of the work between its start and its end, as a Chrome trace: libtorch's Kineto
// profiler records the ops and, on a GPU, the device's kernels and copies, so that `bench train
// --profile` and `bench generate --profile` show where a GPU step's time goes (a CPU-only profile
// would time kernel launches, not kernels).
#pragma once

#include <memory>
#include <string>

#include <torch/torch.h>

namespace gpulab::bench {

class OpProfile {
 public:
  // Starts recording (ops; a CUDA device's kernels too); the trace goes to `file` at finish().
  OpProfile(std::string file, const torch::Device& device);
  ~OpProfile();  // finish()es, if it was not
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Stops recording and writes the trace (once).
  void finish();

 private:
  std::string file_;
  bool running_ = false;
};

}  // namespace gpulab::bench
