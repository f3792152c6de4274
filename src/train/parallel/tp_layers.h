// Tensor-parallel layers (Megatron-LM's ColumnParallelLinear, RowParallelLinear and
// VocabParallelEmbedding): each rank holds one contiguous slice of the full weight, in rank
// order, so the full weight is the ranks' slices concatenated along the split dimension.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

// `n` rounded up to a multiple of `parts` (a vocabulary padded for TP).
int64_t padded_to(int64_t n, int64_t parts);
// Rank `rank`'s slice of `full` along `dim` split in `parts` (the dimension must divide).
torch::Tensor shard_of(const torch::Tensor& full, int64_t dim, int rank, int parts);
// Every rank's `mine` (one shape on every rank), in rank order: collective over the group.
std::vector<torch::Tensor> all_shards_of(const torch::Tensor& mine, TpGroup& group,
                                         const char* what);

// y = x W^T + b with W's output rows split: this rank computes its out/tp outputs. The input
// is replicated (its gradient is summed over the group); the output stays split unless
// gather_output.
struct ColumnParallelLinearImpl : torch::nn::Module {
  // `o`: where the weights are made (the meta device for another pipeline stage's layer).
  ColumnParallelLinearImpl(TpGroup& group, int64_t in, int64_t out, bool bias, bool gather_output,
                           const torch::TensorOptions& o = {});
  torch::Tensor forward(const torch::Tensor& x);
  // The product alone, for an input already copied into the TP region: column layers that read
  // one input share one copy (Megatron's fused QKV and gate/up), so its gradient is all-reduced
  // once, not once per layer. The output stays split.
  torch::Tensor forward_in_region(const torch::Tensor& x_copied);

  TpGroup* group;
  bool gather_output;
  torch::Tensor weight;  // [out / tp, in]
  torch::Tensor bias;    // [out / tp], or undefined
};
TORCH_MODULE(ColumnParallelLinear);

// y = x W^T + b with W's input columns split: this rank multiplies its in/tp inputs and the
// partial outputs are summed over the group. The bias is replicated and added once, after.
struct RowParallelLinearImpl : torch::nn::Module {
  RowParallelLinearImpl(TpGroup& group, int64_t in, int64_t out, bool bias, bool input_is_parallel,
                        const torch::TensorOptions& o = {});
  torch::Tensor forward(const torch::Tensor& x);
  // This rank's partial product of a split input, before the sum and without the bias: sequence
  // parallelism reduce-scatters it instead of all-reducing it.
  torch::Tensor forward_partial(const torch::Tensor& x_split);

  TpGroup* group;
  bool input_is_parallel;
  torch::Tensor weight;  // [out, in / tp]
  torch::Tensor bias;    // [out], or undefined
};
TORCH_MODULE(RowParallelLinear);

// An embedding whose rows (the vocabulary, padded to a multiple of tp) are split: a rank looks
// up the ids it holds, zeroes the others, and the group sums the rows.
struct VocabParallelEmbeddingImpl : torch::nn::Module {
  VocabParallelEmbeddingImpl(TpGroup& group, int64_t vocab, int64_t dim,
                             const torch::TensorOptions& o = {});
  torch::Tensor forward(const torch::Tensor& ids);
  // This rank's rows looked up (zeros for ids it does not hold), before the sum over the group.
  torch::Tensor forward_partial(const torch::Tensor& ids);

  int64_t vocab_start() const { return group->rank() * weight.size(0); }

  TpGroup* group;
  int64_t vocab;         // the real vocabulary (ids at or above it are refused)
  torch::Tensor weight;  // [padded_to(vocab, tp) / tp, dim]
};
TORCH_MODULE(VocabParallelEmbedding);

}  // namespace gpulab::train::parallel
