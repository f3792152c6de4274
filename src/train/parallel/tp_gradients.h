// What every tensor-parallel model does with its gradients after the backward pass, whatever its
// family: sums over the group of what each rank holds part of (in one collective), and the
// global gradient norm of a model split over the group, with torch's clipping.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "train/dist/communicator.h"
#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

// The tensors flattened into one (one collective for all of them), and back in place.
torch::Tensor flatten_together(const std::vector<torch::Tensor>& ts);
void unflatten_into(const torch::Tensor& flat, std::vector<torch::Tensor>& ts);

// Each tensor summed over the group in place, in one all-reduce (nothing for an empty list).
void allreduce_sum_together(std::vector<torch::Tensor>& ts, TpGroup& group, const char* what);

// torch::nn::utils::clip_grad_norm_ over the whole model: the global 2-norm of the squares of
// `split` (each rank's part, summed over the group) and `replicated` (equal on every rank,
// counted once); every tensor of `scaled` is multiplied by min(1, max_norm / (norm + 1e-6)).
// `disjoint`: a data-parallel group whose ranks hold disjoint pieces of both (sharded
// gradients), over which the squares are summed too; null otherwise. Returns the norm; every
// rank calls it.
double clip_tp_gradients(const std::vector<torch::Tensor>& split,
                         const std::vector<torch::Tensor>& replicated,
                         const std::vector<torch::Tensor>& scaled, double max_norm,
                         dist::Communicator* disjoint, TpGroup& group);

}  // namespace gpulab::train::parallel
