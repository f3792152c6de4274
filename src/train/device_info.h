// Describes a compute device the way the seed's GPU test prints it: name, memory, number of
// multiprocessors (cores on a CPU), compute capability; and parses --device strings.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "core/json.h"

namespace gpulab::train {

struct DeviceInfo {
  std::string device;  // "cpu", "cuda:0"
  std::string name;    // "NVIDIA H100 80GB HBM3", "AMD EPYC 7B13"
  int64_t total_memory_bytes = 0;
  int64_t multiprocessor_count = 0;  // SMs / CUs on a GPU, logical cores on a CPU
  std::string compute_capability;    // "9.0" (NVIDIA), "9.4" (gfx942 under HIP); empty on CPU
  Json to_json() const;
};

DeviceInfo describe_device(const torch::Device& device);

}  // namespace gpulab::train
