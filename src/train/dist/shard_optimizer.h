// The shard-local side of the optimizer step: the optimizer (gpulab's usual one, fused SGD or
// AdamW) is built over this rank's flat shards, grouped as make_optimizer groups a model's
// parameters (weights that decay, norms and biases that do not), so its state is sharded too;
// and gradient clipping by the global norm over every rank's shards.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "train/dist/communicator.h"
#include "train/dist/sharded_model.h"
#include "train/optim/optimizers.h"

namespace gpulab::train::dist {

// torch::nn::utils::clip_grad_norm_'s rule over all ranks: the 2-norm of every rank's gradient
// shards (padding is zero), then each grad scaled by min(1, max_norm / (norm + 1e-6)).
// Returns the global norm.
double clip_shard_grad_norm(Communicator& comm, const std::vector<torch::Tensor>& shards,
                            double max_norm);

// Bytes of optimizer state this rank holds (momentum buffers, Adam moments, step counters).
int64_t optimizer_state_bytes(const torch::optim::Optimizer& opt);

}  // namespace gpulab::train::dist
