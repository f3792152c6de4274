// The GRPO / DAPO / Dr. GRPO policy loss (see grpo_loss.h).
#include "train/rl/grpo_loss.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace gpulab::train::rl {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Exception(Code::kInvalidArgument, "grpo_loss: " + what);
}

void check_inputs(const GrpoLossInputs& in, const GrpoLossOptions& opts) {
  if (auto s = check_grpo_loss_options(opts); !s.ok()) throw Exception(s.error());
  require(in.log_probs.defined() && in.log_probs.dim() == 2, "log_probs must be [N, T]");
  const auto shape = in.log_probs.sizes();
  require(in.mask.defined() && in.mask.sizes() == shape, "mask must be shaped as log_probs");
  require(!in.old_log_probs.defined() || in.old_log_probs.sizes() == shape,
          "old_log_probs must be shaped as log_probs");
  require(in.advantages.defined() && in.advantages.dim() == 1 && in.advantages.size(0) == shape[0],
          "advantages must be [N]");
  require(opts.beta == 0.0 || (in.ref_log_probs.defined() && in.ref_log_probs.sizes() == shape),
          "a KL weight beta > 0 needs ref_log_probs shaped as log_probs");
  require(opts.importance.mode == ImportanceMode::kOff ||
              (in.sampling_log_probs.defined() && in.sampling_log_probs.sizes() == shape),
          "importance sampling needs sampling_log_probs shaped as log_probs");
  require(opts.type != GrpoLossType::kDrGrpo || opts.max_completion_length >= shape[1],
          fmt::format("dr_grpo's max completion length {} is shorter than the {} completion "
                      "positions",
                      opts.max_completion_length, shape[1]));
}

// The masked per-token losses aggregated as the variant says.
torch::Tensor aggregate(const torch::Tensor& per_token, const torch::Tensor& mask,
                        const GrpoLossOptions& opts) {
  const auto masked = per_token * mask;
  switch (opts.type) {
    case GrpoLossType::kGrpo:
      return (masked.sum(-1) / mask.sum(-1).clamp_min(1.0)).mean();
    case GrpoLossType::kDapo:
      return masked.sum() / mask.sum().clamp_min(1.0);
    case GrpoLossType::kDrGrpo:
      return masked.sum() / static_cast<double>(per_token.size(0) * opts.max_completion_length);
  }
  return {};
}

}  // namespace

Result<GrpoLossType> parse_grpo_loss_type(std::string_view name) {
  if (name == "grpo") return GrpoLossType::kGrpo;
  if (name == "dapo") return GrpoLossType::kDapo;
  if (name == "dr_grpo") return GrpoLossType::kDrGrpo;
  return Error(Code::kInvalidArgument, fmt::format("unknown GRPO loss '{}'", name),
               "use grpo (per sequence), dapo (per token) or dr_grpo (no length normalisation)");
}

std::string_view grpo_loss_type_name(GrpoLossType type) {
  switch (type) {
    case GrpoLossType::kGrpo:
      return "grpo";
    case GrpoLossType::kDapo:
      return "dapo";
    case GrpoLossType::kDrGrpo:
      return "dr_grpo";
  }
  return "?";
}

Status check_grpo_loss_options(const GrpoLossOptions& o) {
  if (!(o.epsilon_low >= 0 && o.epsilon_low < 1))
    return Error(Code::kInvalidArgument,
                 fmt::format("epsilon_low {} is outside [0, 1)", o.epsilon_low),
                 "the ratio is clipped at 1 - epsilon_low, which must stay positive");
  if (!(o.epsilon_high >= 0 && std::isfinite(o.epsilon_high)))
    return Error(Code::kInvalidArgument,
                 fmt::format("epsilon_high {} is not a finite number >= 0", o.epsilon_high));
  if (!(o.beta >= 0 && std::isfinite(o.beta)))
    return Error(Code::kInvalidArgument,
                 fmt::format("the KL weight beta {} is not a finite number >= 0", o.beta));
  if (auto st = check_importance_sampling(o.importance); !st) return st;
  if (o.type == GrpoLossType::kDrGrpo && o.max_completion_length <= 0)
    return Error(Code::kInvalidArgument, "dr_grpo needs the maximum completion length",
                 "it divides by sequences × max new tokens");
  return ok_status();
}

GrpoLossResult grpo_loss(const GrpoLossInputs& in, const GrpoLossOptions& opts) {
  check_inputs(in, opts);
  const auto& lp = in.log_probs;
  const auto mask = in.mask.to(lp.scalar_type());
  const auto old = in.old_log_probs.defined() ? in.old_log_probs : lp.detach();
  const auto ratio = torch::exp(lp - old);
  const auto clipped = torch::clamp(ratio, 1.0 - opts.epsilon_low, 1.0 + opts.epsilon_high);
  const auto adv = in.advantages.to(lp.scalar_type()).unsqueeze(1);
  auto per_token = -torch::min(ratio * adv, clipped * adv);
  GrpoLossResult out;
  if (opts.importance.mode != ImportanceMode::kOff) {
    const auto w = importance_weights(old, in.sampling_log_probs, in.mask, opts.importance);
    per_token = per_token * w.weights;  // before the KL term, which it does not weight
    out.importance_mean = w.mean;
    out.importance_capped = w.capped;
  }
  const auto tokens = mask.sum().clamp_min(1.0);
  if (opts.beta != 0.0) {
    const auto d = in.ref_log_probs - lp;
    const auto kl = torch::exp(d) - d - 1;
    per_token = per_token + opts.beta * kl;
    out.kl = ((kl * mask).sum() / tokens).detach();
  }
  out.loss = aggregate(per_token, mask, opts);
  torch::NoGradGuard no_grad;
  out.clip_low =
      ((ratio < 1.0 - opts.epsilon_low) & (adv < 0)).to(mask.scalar_type()).mul(mask).sum() /
      tokens;
  out.clip_high =
      ((ratio > 1.0 + opts.epsilon_high) & (adv > 0)).to(mask.scalar_type()).mul(mask).sum() /
      tokens;
  return out;
}

}  // namespace gpulab::train::rl
