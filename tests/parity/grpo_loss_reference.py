"""TRL GRPOTrainer's policy loss, transcribed into PyTorch: the reference for train/rl/grpo_loss.

  grpo_loss_reference.py IN OUT CASES_JSON

IN holds `logits` [N, T, V] float64 (the policy's, aligned with the completion tokens), `tokens`
[N, T] int64, `mask` [N, T] float64, `old`, `ref` and `sampling` [N, T] float64 (the old policy's,
the frozen reference's and the sampler's log-probabilities) and `rewards` [N] float64. For each
case i of the JSON list ({type, epsilon_low, epsilon_high, beta, max_completion_length, group_size,
scale_rewards, use_old, temperature, is_mode, is_min, is_max}) OUT gets `loss.i`, `grad.i`
(d loss / d logits), `advantages.i`, `kl.i`, `clip_low.i`, `clip_high.i`, `is_mean.i` and
`is_capped.i` (the importance weights' mean and the share the bounds changed; 0 when is_mode is
"off").

trl is not in the pinned environment, so its code is transcribed here, from huggingface/trl
f2cd57710ae3 (2026-07-24): trl/trainer/grpo_trainer.py `_generate_and_score_completions` (the
group advantages, scale_rewards "group" or "none"), `_compute_loss` (token-level importance
sampling, loss types grpo, dr_grpo and dapo, one process, no gradient accumulation) and the clip
metrics; trl/trainer/utils.py `selective_log_softmax` and `nanstd`. The correction against the
sampling engine (vllm_importance_sampling_mode token_/sequence_ truncate/mask, clip_min/max, and
its ratio metrics) from trl 1.16.0's grpo_trainer.py, as pip installs it.
"""
import json
import math
import sys

import torch
from safetensors.torch import load_file, save_file


def nanstd(tensor, dim):
    # trl/trainer/utils.py: the sample standard deviation (Bessel's correction), NaNs ignored.
    # One change: TRL's `count / (count - 1)` divides int64 tensors, which gives float32 (4/3 as
    # 1.3333333730697632), so in fp64 its std is off by ~1.5e-8 relative (seen: advantages 1.9e-8
    # apart). The factor is taken in the rewards' dtype here, so that an fp64 comparison tests the
    # formula rather than TRL's float32 rounding of it (in fp32 training the two are the same).
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True).to(tensor.dtype)
    variance *= count / (count - 1)
    return torch.sqrt(variance).squeeze(dim)


def advantages_of(rewards, case):
    g = case["group_size"]
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    std_rewards = nanstd(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    advantages = rewards - mean_grouped_rewards
    if case["scale_rewards"]:
        advantages = advantages / (std_rewards + 1e-4)
    return advantages


def selective_log_softmax(logits, index):
    selected_logits = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
    logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
    return selected_logits - logsumexp_values


def sampling_importance(old_per_token_logps, sampling_per_token_logps, mask, case):
    # trl 1.16.0 _generate_and_score_completions: vllm_importance_sampling_ratio, then its
    # min/mean/max metrics over completion tokens (token modes) or rows (sequence modes).
    mode = case["is_mode"]
    clip_min = case["is_min"] if case["is_min"] > 0 else None
    clip_max = case["is_max"]
    per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask
    per_token_logps_diff = torch.nan_to_num(per_token_logps_diff, nan=0.0)
    if mode in ["sequence_mask", "sequence_truncate"]:
        logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
    else:
        logps_diff = per_token_logps_diff
    raw = torch.exp(logps_diff)
    if mode in ["sequence_truncate", "token_truncate"]:
        ratio = torch.clamp(raw, min=clip_min, max=clip_max)
    else:
        min_val = clip_min if clip_min is not None else -math.inf
        invalid = (raw < min_val) | (raw > clip_max)
        ratio = raw.masked_fill(invalid, value=0.0)
    if mode in ["sequence_mask", "sequence_truncate"]:
        flat, changed = ratio.flatten(), (ratio != raw).flatten()
    else:
        flat, changed = ratio[mask.bool()], (ratio != raw)[mask.bool()]
    return ratio, flat.mean(), changed.double().mean()


def compute_loss(inputs, case):
    logits = inputs["logits"].clone().requires_grad_(True)
    per_token_logps = selective_log_softmax(logits / case["temperature"], inputs["tokens"])
    mask = inputs["mask"]
    advantages = advantages_of(inputs["rewards"], case).unsqueeze(1)
    old_per_token_logps = inputs["old"] if case["use_old"] else per_token_logps.detach()
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    beta = case["beta"]
    if beta != 0.0:
        ref_per_token_logps = inputs["ref"]
        per_token_kl = (torch.exp(ref_per_token_logps - per_token_logps)
                        - (ref_per_token_logps - per_token_logps) - 1)
    coef_2 = torch.clamp(coef_1, 1 - case["epsilon_low"], 1 + case["epsilon_high"])
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    is_mean, is_capped = torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    if case["is_mode"] != "off":
        ratio, is_mean, is_capped = sampling_importance(
            old_per_token_logps.detach(), inputs["sampling"], mask, case)
        per_token_loss = per_token_loss * ratio
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * per_token_kl
    if case["type"] == "grpo":
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif case["type"] == "dr_grpo":
        loss = (per_token_loss * mask).sum() / (per_token_loss.size(0)
                                                * case["max_completion_length"])
    else:  # dapo: num_items_in_batch is the batch's completion tokens on one process
        loss = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
    loss.backward()
    tokens = mask.sum().clamp(min=1.0)
    low = ((coef_1 < 1 - case["epsilon_low"]) & (advantages < 0)).double()
    high = ((coef_1 > 1 + case["epsilon_high"]) & (advantages > 0)).double()
    kl = (per_token_kl * mask).sum() / tokens if beta != 0.0 else torch.zeros(())
    return {"loss": loss.detach(), "grad": logits.grad, "advantages": advantages.squeeze(1),
            "kl": kl.detach(), "clip_low": (low * mask).sum() / tokens,
            "clip_high": (high * mask).sum() / tokens, "is_mean": is_mean.detach(),
            "is_capped": is_capped.detach()}


def main():
    inputs = load_file(sys.argv[1])
    out = {}
    for i, case in enumerate(json.loads(sys.argv[3])):
        for name, value in compute_loss(inputs, case).items():
            out[f"{name}.{i}"] = value.contiguous()
    save_file(out, sys.argv[2])


if __name__ == "__main__":
    main()
