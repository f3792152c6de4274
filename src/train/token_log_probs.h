// The log-probability of each chosen token under a model's logits at a sampling temperature: the
// one definition the GRPO loss trains with and the rollouts record as they sample, so that the
// two agree bit for bit where the policy is the same.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// log π(token | prefix) for each token: logits [N, T, V] already aligned with tokens [N, T]
// (position t's logits predict token t), divided by the sampling temperature first, as the
// sampler drew them (TRL does the same); before any repetition penalty, top-k or top-p.
// log_softmax + gather, differentiable in logits. Throws gpulab::Exception (kInvalidArgument)
// for shapes that do not agree, a token outside V or a temperature that is not positive.
torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens,
                              double temperature = 1.0);

// The temperature log-probabilities are taken at for a sampling temperature: greedy (0) reads
// as 1.
inline double log_prob_temperature(double sampling_temperature) {
  return sampling_temperature > 0 ? sampling_temperature : 1.0;
}

}  // namespace gpulab::train
