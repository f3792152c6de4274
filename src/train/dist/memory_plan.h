// The memory planner of sharded data parallel: per-device bytes by part (parameters, gradients,
// optimizer state, activations, buffers) for each shard stage, from a model's real layout (its
// flat groups under the wrap policy, counted on the model itself) and one measured forward pass
// (activations per sample). The same accounting is what `gpulab train --shard` prints at start
// and checks against the tensors it holds after the first step (ShardedModel::memory()).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "train/dist/sharded_model.h"

namespace gpulab::train::dist {

// What a model is made of, independent of the world size.
struct ModelFootprint {
  std::vector<std::vector<int64_t>> units;  // per unit: element counts of its flat groups
  std::vector<bool> frees;                  // per unit: run through run_unit (ZeRO-3 frees it)
  // Per unit, per group: keeps the master dtype under mixed precision (BatchNorm); missing: no.
  std::vector<std::vector<bool>> keeps_master;
  int64_t params = 0;       // trainable elements
  int64_t param_bytes = 4;  // bytes per element of the parameters
  int64_t buffer_bytes = 0;
  int64_t activation_bytes_per_sample = 0;  // distinct forward outputs, batch 1, training mode
  int64_t unit_input_bytes_per_sample = 0;  // what activation checkpointing keeps per sample
};

// Counts `model` (its parameters as they are, the wrap policy's units) and runs `forward` once on
// `samples` samples to measure activations per sample (BatchNorm in training mode needs two
// where its input is 1x1). `announced` says which units the model runs via run_unit.
ModelFootprint measure_footprint(torch::nn::Module& model, const std::string& wrap,
                                 const std::function<torch::Tensor()>& forward,
                                 int64_t samples = 1);

// The same from a sharded model's layout (no forward pass: activations 0).
ModelFootprint footprint_of(const ShardedModel& sharded);

// State tensors per parameter the planner assumes for an optimizer: SGD with momentum 1,
// without 0; Adam and AdamW 2 (their moments).
int optimizer_state_tensors(const torch::optim::Optimizer& opt);

struct MemoryParts {
  int64_t params = 0;
  int64_t grads = 0;
  int64_t optimizer = 0;
  int64_t activations = 0;
  int64_t buffers = 0;
  int64_t total() const { return params + grads + optimizer + activations + buffers; }
};

struct PlanQuery {
  ShardStage stage = ShardStage::kFull;
  int world = 1;
  int64_t batch_size = 1;         // per device
  int optimizer_states = 1;       // tensors per parameter: SGD momentum 1, AdamW 2
  double activation_scale = 1.0;  // 0.5 for bf16/fp16 autocast
  bool activation_checkpointing = false;
  // Sharded mixed precision, bytes per element (0: the parameters' own): the gathered compute
  // copies and their gradients, and the reduce-scatter's flat gradient.
  int64_t compute_bytes = 0;
  int64_t reduce_bytes = 0;
  // Gloo's pairwise reduce-scatter (a rank receives N-1 slices per unit) instead of NCCL's (it
  // receives its own slice).
  bool pairwise_reduce = false;
};

// Steady state right after an optimizer step (what train measures) ...
MemoryParts plan_after_step(const ModelFootprint& f, const PlanQuery& q);
// ... and the peak during a step (gathered units, gradients in flight, activations).
MemoryParts plan_peak(const ModelFootprint& f, const PlanQuery& q);
// Bytes each rank sends per optimizer step (NCCL and Gloo alike: shard_collectives.h).
int64_t comm_bytes_per_step(const ModelFootprint& f, const PlanQuery& q);

// Device memory of a GPU name (h100, h200, a100, mi300x, ...) in bytes; 0 if unknown.
int64_t device_memory_bytes(const std::string& gpu);
const std::vector<std::string>& known_gpus();

// "1.23 GiB"
std::string human_bytes(int64_t bytes);

}  // namespace gpulab::train::dist
