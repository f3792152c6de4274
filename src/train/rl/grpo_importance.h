// Importance sampling against the policy that sampled (TRL's vllm_importance_sampling_*): when
// the rollouts were drawn by other weights than the ones the step starts from (overlapped
// generation samples with the policy one optimizer step older; a generation engine may also
// round differently), each completion token's loss is weighted by
// r = π_old(token) / π_sampler(token) = exp(log π_old − log π_sampler), per token or per sequence
// (the product over its tokens), then truncated to [C_min, C_max] or set to 0 outside it (mask).
#pragma once

#include <torch/torch.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::train::rl {

enum class ImportanceMode { kOff, kTokenTruncate, kTokenMask, kSequenceTruncate, kSequenceMask };

struct ImportanceSampling {
  ImportanceMode mode = ImportanceMode::kOff;
  double min = 0;    // C_min; 0: no lower bound
  double max = 3.0;  // C_max (TRL's default)
};

// "off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"; anything else
// kInvalidArgument naming them.
Result<ImportanceMode> parse_importance_mode(std::string_view name);
std::string_view importance_mode_name(ImportanceMode mode);
const std::vector<std::string>& importance_mode_names();

// kInvalidArgument for bounds that are not finite, a negative C_min, or C_max not above C_min.
Status check_importance_sampling(const ImportanceSampling& is);

struct ImportanceWeights {
  torch::Tensor weights;  // [N, T] per token or [N, 1] per sequence, detached; multiplies the loss
  torch::Tensor mean;     // the weights' mean over completion tokens (token) or rows (sequence)
  torch::Tensor capped;   // the share of those the bounds changed (truncated or masked)
};

// old and sampling [N, T] (log-probabilities), mask [N, T] (1 on completion tokens). A NaN in
// `sampling` counts as no difference (weight 1 for that token), as TRL does. Throws
// gpulab::Exception (kInvalidArgument) for shapes that do not agree or mode off.
ImportanceWeights importance_weights(const torch::Tensor& old, const torch::Tensor& sampling,
                                     const torch::Tensor& mask, const ImportanceSampling& is);

}  // namespace gpulab::train::rl
