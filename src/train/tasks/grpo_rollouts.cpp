// GRPO's rollouts and their tensors (see grpo_rollouts.h).
#include "train/tasks/grpo_rollouts.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"
#include "train/rollout.h"

namespace gpulab::train {

StepRollouts rollouts_for_step(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                               int64_t group, const SamplingOptions& opts, TokenSampler& sampler) {
  // Every prompt x group in one batch: left-padded, each prefix once, finished rows dropped.
  auto batch = generate_groups(model, prompts, group, opts, sampler);
  return {std::move(batch.completions), std::move(batch.log_probs)};
}

std::vector<StepRollouts> rollouts_for_shares(
    CausalLm& model, const std::vector<std::vector<std::vector<int64_t>>>& prompts, int64_t group,
    const SamplingOptions& opts, std::vector<TokenSampler>& samplers) {
  GPULAB_ASSERT(prompts.size() == samplers.size(), "one sampler per share");
  std::vector<std::vector<int64_t>> all;
  std::vector<PromptSegment> segments;
  for (size_t s = 0; s < prompts.size(); ++s) {
    all.insert(all.end(), prompts[s].begin(), prompts[s].end());
    segments.push_back({static_cast<int64_t>(prompts[s].size()), &samplers[s]});
  }
  auto batch = generate_groups(model, all, group, opts, segments);
  std::vector<StepRollouts> out(prompts.size());
  size_t row = 0;
  for (size_t s = 0; s < prompts.size(); ++s) {
    const size_t rows = prompts[s].size() * static_cast<size_t>(group);
    for (size_t r = row; r < row + rows; ++r) {
      out[s].completions.push_back(std::move(batch.completions[r]));
      if (!batch.log_probs.empty()) out[s].log_probs.push_back(std::move(batch.log_probs[r]));
    }
    row += rows;
  }
  return out;
}

int64_t grpo_steps_per_epoch(int64_t prompt_count, int64_t per_rank, int world) {
  return std::max<int64_t>(1, prompt_count / (per_rank * world));
}

std::vector<int64_t> grpo_step_prompts(int64_t prompt_count, int64_t seed, int64_t steps_per_epoch,
                                       int64_t step, int rank, int world, int64_t per_rank) {
  std::vector<int64_t> order(static_cast<size_t>(prompt_count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 1000003ULL +
                      static_cast<uint64_t>(step / steps_per_epoch));
  std::shuffle(order.begin(), order.end(), rng);
  const int64_t first = (step % steps_per_epoch * world + rank) * per_rank;
  return {order.begin() + first, order.begin() + first + per_rank};
}

uint64_t grpo_sampler_seed(int64_t seed, int64_t step, int rank, int world) {
  return static_cast<uint64_t>(seed) * 7919ULL + static_cast<uint64_t>(step * world + rank);
}

namespace {

// The recorded log-probabilities of `rows`, [N, c_max] float64, 0 after each row's end.
torch::Tensor sampling_log_probs(const StepRollouts& rollouts, const std::vector<int64_t>& rows,
                                 int64_t c_max) {
  auto out = torch::zeros({static_cast<int64_t>(rows.size()), c_max}, torch::kDouble);
  auto a = out.accessor<double, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& lp = rollouts.log_probs.at(static_cast<size_t>(rows[i]));
    for (size_t j = 0; j < lp.size(); ++j)
      a[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = lp[j];
  }
  return out;
}

}  // namespace

RolloutTensors rollout_tensors(const std::vector<std::vector<int64_t>>& prompts,
                               const StepRollouts& rollouts, const std::vector<int64_t>& rows,
                               int64_t group, int64_t pad_id) {
  const auto& completions = rollouts.completions;
  const auto n = static_cast<int64_t>(rows.size());
  size_t t_max = 1, c_max = 1;
  for (int64_t r : rows) {
    const auto& p = prompts[static_cast<size_t>(r / group)];
    const auto& c = completions[static_cast<size_t>(r)];
    t_max = std::max(t_max, p.size() + c.size());
    c_max = std::max(c_max, c.size());
  }
  const auto longs = torch::TensorOptions().dtype(torch::kLong);
  RolloutTensors out;
  out.inputs = torch::full({n, static_cast<int64_t>(t_max)}, pad_id, longs);
  out.tokens = torch::zeros({n, static_cast<int64_t>(c_max)}, longs);
  out.positions = torch::zeros({n, static_cast<int64_t>(c_max)}, longs);
  out.mask = torch::zeros({n, static_cast<int64_t>(c_max)}, torch::kFloat);
  auto in = out.inputs.accessor<int64_t, 2>();
  auto tok = out.tokens.accessor<int64_t, 2>();
  auto pos = out.positions.accessor<int64_t, 2>();
  auto mask = out.mask.accessor<float, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& p = prompts[static_cast<size_t>(rows[static_cast<size_t>(i)] / group)];
    const auto& c = completions[static_cast<size_t>(rows[static_cast<size_t>(i)])];
    const auto plen = static_cast<int64_t>(p.size());
    for (int64_t t = 0; t < plen; ++t) in[i][t] = p[static_cast<size_t>(t)];
    for (int64_t j = 0; j < static_cast<int64_t>(c.size()); ++j) {
      in[i][plen + j] = c[static_cast<size_t>(j)];
      tok[i][j] = c[static_cast<size_t>(j)];
      pos[i][j] = plen + j - 1;  // the logits after the token before it
      mask[i][j] = 1;
    }
    out.sequence_tokens += plen + static_cast<int64_t>(c.size());
  }
  if (!rollouts.log_probs.empty())
    out.sampling_log_probs = sampling_log_probs(rollouts, rows, static_cast<int64_t>(c_max));
  return out;
}

torch::Tensor completion_logits(const torch::Tensor& outputs, const torch::Tensor& positions) {
  const auto index = positions.unsqueeze(-1).expand({-1, -1, outputs.size(-1)});
  return outputs.gather(1, index);
}

}  // namespace gpulab::train
