// `gpulab bench parity`: does a device compute what the CPU computes? One model (an image
// classifier or a language model of the zoo) is built twice from one seed; a float64 copy on the
// CPU is the oracle, and the device's float32 forward pass (logits) and one backward pass (every
// parameter's gradient) are measured against it, beside the CPU's own float32 error.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"

namespace gpulab::bench {

struct ParityOptions {
  std::string model = "resnet18";  // an image model (32 px input) or a llama-* language model
  std::string device = "auto";
  int64_t batch_size = 4;
  int64_t seq_len = 64;  // language models
  uint64_t seed = 0;
  double tolerance = 1e-3;  // largest relative error that passes (float32 against float64)
};

// Relative errors against the float64 oracle: max |x - ref| / max |ref|, per tensor; the
// gradient figure is the worst parameter's.
struct ParityErrors {
  double logits = 0, gradients = 0;
  std::string worst_parameter;
};

struct ParityReport {
  std::string model, device;
  int64_t parameters = 0;
  ParityErrors device_error;  // the device in float32 (TF32 off) against the oracle
  ParityErrors cpu_error;     // the CPU in float32 against the oracle, for scale
  double tolerance = 0;
  bool passed() const {
    return device_error.logits <= tolerance && device_error.gradients <= tolerance;
  }
  Json to_json() const;
  std::string summary() const;
};

// Throws gpulab::Exception for an unknown model or an unusable device (this build's libtorch has
// no CUDA: exit 3).
ParityReport run_parity(const ParityOptions& opts);

}  // namespace gpulab::bench
