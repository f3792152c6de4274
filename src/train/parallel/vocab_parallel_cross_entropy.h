// Cross-entropy over logits split along the vocabulary (Megatron-LM's vocab-parallel loss):
// the full logits are never gathered. The max, the target's logit and the sum of exponentials
// are reduced across the group; the gradient, softmax - onehot, stays local to each rank.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

inline constexpr int64_t kIgnoreIndex = -100;  // as torch's cross_entropy and Hugging Face labels

// `logits` [..., V_local]: this rank's columns, which start at global index `vocab_start`;
// columns at or past `vocab_size` (the padding to a multiple of TP) take no part. `target`
// [...] holds global ids in [0, vocab_size), or kIgnoreIndex (loss 0, no gradient). Returns the
// loss of each position [...], the same on every rank; the mean is the caller's. `smoothing`:
// torch's label_smoothing, (1 - s) of the target's loss plus s of the mean over the vocabulary
// of -log p (the logits' sum is reduced with the other sums: no extra collective).
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           TpGroup& group, int64_t vocab_start, int64_t vocab_size,
                                           double smoothing = 0.0);

// The mean of vocab_parallel_cross_entropy over the positions whose target is not kIgnoreIndex
// (logits [..., V_local], target [...]): a tensor-parallel model's training loss.
torch::Tensor vocab_parallel_mean_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                       TpGroup& group, int64_t vocab_start, int64_t vocab_size,
                                       double smoothing = 0.0);

// The whole vocabulary's argmax of each position of `logits` [..., V_local] (as above), without
// gathering the logits: the lowest global index among the maxima, as torch's argmax; the same on
// every rank. Two small reductions.
torch::Tensor vocab_parallel_argmax(const torch::Tensor& logits, TpGroup& group,
                                    int64_t vocab_start, int64_t vocab_size);

}  // namespace gpulab::train::parallel
