// GRPO with generation ranks of its own (docs/rl.md): the policy's weights copied from training
// rank 0 to the generation ranks over the process group after optimizer steps (no file round
// trip), and a bitwise fingerprint of a model's weights that tests compare across ranks.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "train/dist/communicator.h"

namespace gpulab::train::rl {

// Every member of `group` ends with `root`'s parameter values, bit for bit: first each
// parameter's dtype (a receiver whose parameter differs takes the sender's dtype), then one flat
// buffer per dtype. Every member calls it, in step; the models have the same shape (same config).
// Throws gpulab::Exception when the parameter counts differ, or a collective fails.
void broadcast_weights(dist::Communicator& group, int root, torch::nn::Module& model);

// FNV-1a over the bytes of every parameter, in the module's order: equal on two ranks exactly
// when their weights are (up to a hash collision).
uint64_t weights_hash(torch::nn::Module& model);

}  // namespace gpulab::train::rl
