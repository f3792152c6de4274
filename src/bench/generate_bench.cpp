// Greedy generation timed run by run (see generate_bench.h).
#include "bench/generate_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "bench/op_profile.h"
#include "bench/trace_summary.h"

#include "train/generate.h"
#include "train/rollout.h"

namespace gpulab::bench {
namespace {

// The median wall time of `reps` runs of fn after `warmup` untimed ones; with a profile file, the
// timed runs are recorded there.
template <class Fn>
double median_seconds(int64_t warmup, int64_t reps, Fn&& fn, const std::string& profile = {}) {
  for (int64_t i = 0; i < warmup; ++i) fn();
  std::unique_ptr<OpProfile> profiler;
  if (!profile.empty()) profiler = std::make_unique<OpProfile>(profile);
  std::vector<double> seconds;
  for (int64_t i = 0; i < std::max<int64_t>(reps, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  profiler.reset();  // writes the trace
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

std::vector<int64_t> bench_prompt(int64_t length, int64_t vocab_size) {
  std::vector<int64_t> ids(static_cast<size_t>(length));
  // A large prime stride: ids that are neither all equal nor a run a model might echo.
  for (int64_t i = 0; i < length; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + 13) % vocab_size;
  return ids;
}

GenerateBenchResult run_generate_bench(train::CausalLm& model, const GenerateBenchOptions& o) {
  GenerateBenchResult r;
  r.prompt = bench_prompt(o.prompt_tokens, model.config().vocab_size);
  train::SamplingOptions s;
  s.max_new_tokens = o.new_tokens;
  s.temperature = 0;  // greedy, as the reference's do_sample=False
  r.seconds = median_seconds(
      o.warmup, o.reps, [&] { r.tokens = train::generate(model, r.prompt, s); }, o.profile);
  if (!o.profile.empty()) r.profile_top = summarize_trace(o.profile);
  r.tokens_per_second = r.seconds > 0 ? static_cast<double>(o.new_tokens) / r.seconds : 0;
  return r;
}

std::vector<std::vector<int64_t>> bench_prompts(const std::vector<int64_t>& lengths,
                                                int64_t vocab_size) {
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto ids = bench_prompt(lengths[i], vocab_size);
    for (auto& id : ids) id = (id + static_cast<int64_t>(i) * 7919) % vocab_size;
    out.push_back(std::move(ids));
  }
  return out;
}

RolloutBenchResult run_rollout_bench(train::CausalLm& model, const GenerateBenchOptions& o) {
  RolloutBenchResult r;
  r.prompts = bench_prompts(o.prompt_lengths, model.config().vocab_size);
  train::SamplingOptions s;
  s.max_new_tokens = o.new_tokens;
  s.temperature = 0;  // sampling off, as the reference's do_sample=False
  train::TokenSampler sampler(s, 0);
  r.seconds = median_seconds(
      o.warmup, o.reps,
      [&] { r.tokens = train::generate_groups(model, r.prompts, o.group, s, sampler).completions; },
      o.profile);
  if (!o.profile.empty()) r.profile_top = summarize_trace(o.profile);
  std::vector<std::vector<int64_t>> one_by_one;
  r.per_prompt_seconds = median_seconds(o.warmup, o.reps, [&] {
    one_by_one.clear();
    for (const auto& prompt : r.prompts)
      for (auto& row : train::generate_rows(model, prompt, o.group, s, sampler))
        one_by_one.push_back(std::move(row));
  });
  r.same_tokens = one_by_one == r.tokens;
  const auto tokens = static_cast<double>(r.prompts.size()) * static_cast<double>(o.group) *
                      static_cast<double>(o.new_tokens);
  r.tokens_per_second = r.seconds > 0 ? tokens / r.seconds : 0;
  r.per_prompt_tokens_per_second = r.per_prompt_seconds > 0 ? tokens / r.per_prompt_seconds : 0;
  return r;
}

}  // namespace gpulab::bench
