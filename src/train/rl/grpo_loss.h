// The GRPO policy loss, in the three variants of TRL's GRPOTrainer (`_compute_loss`): per token,
// −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A) with ρ = exp(log π − log π_old), plus β times the k3
// estimate of KL(π‖π_ref) = exp(log π_ref − log π) − (log π_ref − log π) − 1; then aggregated:
//   grpo     mean over each sequence's completion tokens, then over sequences (DeepSeekMath)
//   dapo     sum over all completion tokens / their count (token level, DAPO)
//   dr_grpo  sum over all completion tokens / (sequences × max completion length) (Dr. GRPO)
// With μ = 1 inner iteration π_old is π itself (ρ = 1, its gradient still flows through π); with
// μ > 1 the caller passes the log-probabilities of the policy that sampled.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "train/rl/grpo_importance.h"
#include "train/token_log_probs.h"  // the log-probabilities the loss takes

namespace gpulab::train::rl {

enum class GrpoLossType { kGrpo, kDapo, kDrGrpo };

// "grpo", "dapo", "dr_grpo"; anything else kInvalidArgument naming them.
Result<GrpoLossType> parse_grpo_loss_type(std::string_view name);
std::string_view grpo_loss_type_name(GrpoLossType type);

struct GrpoLossOptions {
  GrpoLossType type = GrpoLossType::kDapo;  // TRL's default
  double epsilon_low = 0.2;
  double epsilon_high = 0.2;          // DAPO's clip-higher: 0.28
  double beta = 0.0;                  // the KL weight (DeepSeekMath 0.04); > 0 needs ref_log_probs
  int64_t max_completion_length = 0;  // dr_grpo's divisor: the configured max new tokens
  ImportanceSampling importance{};    // weights against the sampling policy (off: none)
};

// kInvalidArgument for ε_low outside [0, 1), ε_high or β negative or not finite, or dr_grpo
// without a positive max completion length.
Status check_grpo_loss_options(const GrpoLossOptions& opts);

struct GrpoLossInputs {
  torch::Tensor log_probs{};      // [N, T] under the policy being trained (requires grad)
  torch::Tensor old_log_probs{};  // [N, T] of the policy that sampled; undefined when μ = 1
  torch::Tensor ref_log_probs{};  // [N, T] of the frozen reference; needed when β > 0
  torch::Tensor advantages{};     // [N]
  torch::Tensor mask{};           // [N, T] 1 on completion tokens, 0 on padding
  // [N, T] recorded by the sampler as it drew each token; needed when importance sampling is on.
  torch::Tensor sampling_log_probs{};
};

struct GrpoLossResult {
  torch::Tensor loss;       // scalar, differentiable
  torch::Tensor kl;         // mean k3 KL over completion tokens (detached); undefined when β = 0
  torch::Tensor clip_low;   // share of completion tokens clipped below (ρ < 1−ε_low, A < 0)
  torch::Tensor clip_high;  // share clipped above (ρ > 1+ε_high, A > 0)
  torch::Tensor importance_mean, importance_capped;  // ImportanceWeights'; undefined when off
};

// With importance sampling on, each token's policy term (not its KL term) is weighted by
// importance_weights(π_old, sampling_log_probs), as TRL does. Throws gpulab::Exception
// (kInvalidArgument) for shapes that do not agree, options that check_grpo_loss_options refuses,
// β > 0 without reference log-probs, importance sampling without sampling log-probs, or a dr_grpo
// max length shorter than T.
GrpoLossResult grpo_loss(const GrpoLossInputs& in, const GrpoLossOptions& opts);

}  // namespace gpulab::train::rl
