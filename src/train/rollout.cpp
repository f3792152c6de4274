// Batched rollouts through the KV cache (see rollout.h): left-padded prefill once per prompt,
// its keys and values repeated for the group, one token per live row a step, finished rows
// dropped from the batch and the cache.
#include "train/rollout.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "train/ops/packed_linear.h"
#include "train/token_log_probs.h"

namespace gpulab::train {
namespace {

void check_rollout_input(const DecoderConfig& c, const std::vector<std::vector<int64_t>>& prompts,
                         int64_t group, const SamplingOptions& opts) {
  if (prompts.empty())
    throw Exception(Code::kInvalidArgument, "there are no prompts to continue",
                    "pass at least one prompt");
  if (group < 1)
    throw Exception(Code::kInvalidArgument,
                    "a group of " + std::to_string(group) + " completions per prompt",
                    "use a group size of 1 or more");
  for (size_t p = 0; p < prompts.size(); ++p)
    check_generation_prompt(c, prompts[p], opts, "prompt " + std::to_string(p));
}

void check_segments(const std::vector<PromptSegment>& segments, size_t prompt_count) {
  int64_t covered = 0;
  for (const auto& s : segments) {
    if (s.prompts < 1 || s.sampler == nullptr)
      throw Exception(Code::kInvalidArgument, "a batch segment without prompts or a sampler",
                      "give each segment one prompt or more and its sampler");
    const auto& a = s.sampler->settings();
    const auto& b = segments.front().sampler->settings();
    GPULAB_ASSERT(a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
                      a.repetition_penalty == b.repetition_penalty,
                  "the segments of one batch sample with the same settings");
    covered += s.prompts;
  }
  if (covered != static_cast<int64_t>(prompt_count))
    throw Exception(Code::kInvalidArgument,
                    "the batch segments hold " + std::to_string(covered) + " prompts of " +
                        std::to_string(prompt_count),
                    "make the segments' prompt counts add up to the prompts");
}

// The rows still being continued: their cache, the logits of their next token and the ids they
// have seen (for the repetition penalty; undefined when it is off).
struct LiveRows {
  std::vector<int64_t> rows;  // each live row's index in the output, ascending
  KvCache cache;
  torch::Tensor logits, history;
};

// Every prompt once, left-padded to the longest, through one forward pass; then each prompt's
// cache and logits repeated for its group.
LiveRows prefill(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts, int64_t group,
                 int64_t max_new_tokens, bool keep_history, torch::Device device) {
  const auto count = static_cast<int64_t>(prompts.size());
  int64_t longest = 0, shortest = static_cast<int64_t>(prompts.front().size());
  for (const auto& p : prompts) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    shortest = std::min<int64_t>(shortest, static_cast<int64_t>(p.size()));
  }
  // Padding ids: 0 goes through the embedding (a real id), -1 is no token to the penalty.
  auto tokens = torch::zeros({count, longest}, torch::kLong);
  auto seen = torch::full({count, longest}, -1, torch::kLong);
  auto present = torch::zeros({count, longest}, torch::kBool);
  for (int64_t p = 0; p < count; ++p) {
    const auto& ids = prompts[static_cast<size_t>(p)];
    const auto n = static_cast<int64_t>(ids.size());
    const auto row = torch::tensor(ids, torch::kLong);
    tokens[p].narrow(0, longest - n, n).copy_(row);
    seen[p].narrow(0, longest - n, n).copy_(row);
    present[p].narrow(0, longest - n, n).fill_(true);
  }
  LiveRows live;
  live.cache.last_logits_only = true;
  live.cache.reserve = longest + max_new_tokens;
  if (shortest < longest) live.cache.present = present.to(device);  // equal lengths: no mask
  live.logits = model.forward(tokens.to(device), &live.cache).select(1, -1);
  repeat_rows(live.cache, group);
  if (group > 1) live.logits = live.logits.repeat_interleave(group, 0);
  if (keep_history) live.history = seen.repeat_interleave(group, 0);
  live.rows.resize(static_cast<size_t>(count * group));
  for (size_t r = 0; r < live.rows.size(); ++r) live.rows[r] = static_cast<int64_t>(r);
  return live;
}

// The next token of each live row, [rows] int64 on the CPU: each segment's live rows (consecutive,
// as live.rows is ascending) drawn by that segment's sampler.
torch::Tensor draw_next(const LiveRows& live, const std::vector<PromptSegment>& segments,
                        int64_t group) {
  if (segments.size() == 1) return segments.front().sampler->next(live.logits, live.history);
  std::vector<torch::Tensor> parts;
  int64_t end_row = 0;
  size_t i = 0;
  for (const auto& s : segments) {
    end_row += s.prompts * group;
    const size_t begin = i;
    while (i < live.rows.size() && live.rows[i] < end_row) ++i;
    if (i == begin) continue;  // every row of this segment has finished
    const auto b = static_cast<int64_t>(begin), n = static_cast<int64_t>(i - begin);
    const auto history = live.history.defined() ? live.history.narrow(0, b, n) : torch::Tensor();
    parts.push_back(s.sampler->next(live.logits.narrow(0, b, n), history));
  }
  return torch::cat(parts);
}

// The log-probability of each live row's chosen token, [rows] float64 on the CPU.
torch::Tensor chosen_log_probs(const LiveRows& live, const torch::Tensor& next,
                               double temperature) {
  const auto tokens = next.to(live.logits.device()).unsqueeze(1);
  // bf16 / fp16 logits in fp32, as the training loss takes them (in its compute dtype).
  const auto logits = at::isReducedFloatingType(live.logits.scalar_type())
                          ? live.logits.to(torch::kFloat)
                          : live.logits;
  return token_log_probs(logits.unsqueeze(1), tokens, log_prob_temperature(temperature))
      .squeeze(1)
      .to(torch::kDouble)
      .cpu();
}

// Hands each live row its token (and its log-probability when recorded); returns the indices
// (into live.rows) of those that go on.
std::vector<int64_t> take_tokens(const torch::Tensor& next, const torch::Tensor& lp,
                                 const LiveRows& live, const SamplingOptions& opts,
                                 const OnRowToken& on_token, RolloutBatch& out) {
  const auto* ids = next.data_ptr<int64_t>();
  std::vector<int64_t> going_on;
  for (size_t i = 0; i < live.rows.size(); ++i) {
    const int64_t row = live.rows[i];
    out.completions[static_cast<size_t>(row)].push_back(ids[i]);
    if (lp.defined()) out.log_probs[static_cast<size_t>(row)].push_back(lp.data_ptr<double>()[i]);
    ++out.generated_tokens;
    const bool more = on_token ? on_token(row, ids[i]) : true;
    if (more && ids[i] != opts.eos_id) going_on.push_back(static_cast<int64_t>(i));
  }
  return going_on;
}

// Drops the finished rows (from the cache too), then runs the rows that go on one token further.
void advance(CausalLm& model, LiveRows& live, torch::Tensor next,
             const std::vector<int64_t>& going_on, torch::Device device) {
  if (going_on.size() < live.rows.size()) {
    const auto keep = torch::tensor(going_on, torch::kLong);
    keep_rows(live.cache, keep);
    next = next.index_select(0, keep);
    if (live.history.defined()) live.history = live.history.index_select(0, keep);
    std::vector<int64_t> rows;
    rows.reserve(going_on.size());
    for (int64_t i : going_on) rows.push_back(live.rows[static_cast<size_t>(i)]);
    live.rows = std::move(rows);
  }
  if (live.history.defined()) live.history = torch::cat({live.history, next.unsqueeze(1)}, 1);
  live.logits = model.forward(next.unsqueeze(1).to(device), &live.cache).select(1, -1);
}

}  // namespace

RolloutBatch generate_groups(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                             int64_t group, const SamplingOptions& opts, TokenSampler& sampler,
                             const OnRowToken& on_token) {
  return generate_groups(model, prompts, group, opts,
                         {PromptSegment{static_cast<int64_t>(prompts.size()), &sampler}}, on_token);
}

RolloutBatch generate_groups(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                             int64_t group, const SamplingOptions& opts,
                             const std::vector<PromptSegment>& segments,
                             const OnRowToken& on_token) {
  const auto start = std::chrono::steady_clock::now();
  check_rollout_input(model.config(), prompts, group, opts);
  check_segments(segments, prompts.size());
  const auto& settings = segments.front().sampler->settings();
  RolloutBatch out;
  out.completions.resize(prompts.size() * static_cast<size_t>(group));
  if (opts.record_log_probs) out.log_probs.resize(out.completions.size());
  if (opts.max_new_tokens > 0) {
    torch::NoGradGuard no_grad;
    model.eval();
    const auto device = model.parameters().front().device();
    const bool keep_history = settings.repetition_penalty != 1.0;
    PackedWeights packed;  // each weight packed once for the whole batch's steps
    auto live = prefill(model, prompts, group, opts.max_new_tokens, keep_history, device);
    for (int64_t step = 0;; ++step) {
      const auto next = draw_next(live, segments, group);
      const auto lp = opts.record_log_probs ? chosen_log_probs(live, next, settings.temperature)
                                            : torch::Tensor();
      const auto going_on = take_tokens(next, lp, live, opts, on_token, out);
      if (going_on.empty() || step + 1 == opts.max_new_tokens) break;
      advance(model, live, next, going_on, device);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gpulab::train
