// The four crossings between replicated and tensor-parallel regions, as autograd functions
// (Megatron-LM's mappings): each is the other's transpose, so forward and backward move the
// same bytes. Inputs and outputs stay on the caller's device.
#pragma once

#include <torch/torch.h>

#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

// Identity forward, all-reduce (sum) of the gradient backward: where a replicated input enters
// column-parallel work whose ranks each contribute part of its gradient.
torch::Tensor copy_to_tp(const torch::Tensor& x, TpGroup& group);
// All-reduce (sum) forward, identity backward: where partial results (row-parallel outputs,
// vocabulary-parallel embeddings) become the replicated whole.
torch::Tensor reduce_from_tp(const torch::Tensor& x, TpGroup& group);
// All-gather along the last dimension forward, this rank's slice of the gradient backward.
torch::Tensor gather_from_tp(const torch::Tensor& x, TpGroup& group);
// This rank's slice of the last dimension forward, all-gather of the gradient backward.
torch::Tensor scatter_to_tp(const torch::Tensor& x, TpGroup& group);

// Sequence parallelism's two crossings (Korthikanti et al. 2022; Megatron-LM's
// gather_from_sequence_parallel_region and reduce_scatter_to_sequence_parallel_region), on
// B x T x H activations whose sequence (dimension 1) is split between the norm regions:
// All-gather of the sequence forward, reduce-scatter of the gradient backward: where the norms'
// split output enters column-parallel work (it takes copy_to_tp's place).
torch::Tensor gather_sequence(const torch::Tensor& x, TpGroup& group);
// Reduce-scatter along the sequence forward, all-gather of the gradient backward: where
// row-parallel partial sums return to the split sequence (it takes reduce_from_tp's place).
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, TpGroup& group);

// A sublayer's two crossings, with or without sequence parallelism (`sp`): into column-parallel
// work, a copy of the replicated input or the whole sequence gathered from the ranks' parts; out
// of a row-parallel layer, the sum of the partial products or this rank's positions of it.
torch::Tensor enter_tp(const torch::Tensor& x, TpGroup& group, bool sp);
torch::Tensor leave_tp(const torch::Tensor& partial, TpGroup& group, bool sp);

}  // namespace gpulab::train::parallel
