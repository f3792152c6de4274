// Peak memory of a run, labelled by where it lives: the process's host memory (RSS) and, on a
// GPU, the CUDA caching allocator's peaks (bytes handed to tensors, and bytes reserved from the
// driver, which is what nvidia-smi shows and what runs out).
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace gpulab::train {

// The bytes `m`'s parameters occupy (those on the meta device are shapes: another pipeline
// stage's pieces).
int64_t held_parameter_bytes(const torch::nn::Module& m);

// Peak resident memory of this process (host), bytes.
int64_t peak_host_memory_bytes();

struct DevicePeak {
  int64_t allocated_bytes = 0;  // the most that tensors held at once
  int64_t reserved_bytes = 0;   // the most the caching allocator held from the driver
};

// The caching allocator's peaks since the last reset, for a CUDA (or ROCm) device in a build
// with CUDA; nullopt for the CPU or a build without it.
std::optional<DevicePeak> device_memory_peak(const torch::Device& device);

// Starts the device's peaks afresh (after warm-up, say); nothing on the CPU.
void reset_device_memory_peak(const torch::Device& device);

}  // namespace gpulab::train
