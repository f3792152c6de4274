// A profile of the work between its start and its end, as a Chrome trace: libtorch's Kineto
// profiler records the ops and, where a GPU is visible, its kernels and copies, so that `bench
// train --profile` and `bench generate --profile` show where a GPU step's time goes (a CPU-only
// profile would time kernel launches, not kernels).
#pragma once

#include <string>

namespace gpulab::bench {

class OpProfile {
 public:
  // Starts recording; the destructor stops and writes the trace to `file`.
  explicit OpProfile(std::string file);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

 private:
  std::string file_;
};

}  // namespace gpulab::bench
