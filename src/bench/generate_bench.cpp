// Greedy generation timed run by run (see generate_bench.h).
#include "bench/generate_bench.h"

#include <algorithm>
#include <chrono>

#include "train/generate.h"

namespace gpulab::bench {

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
  for (int64_t i = 0; i < o.warmup; ++i) train::generate(model, r.prompt, s);
  std::vector<double> seconds;
  for (int64_t i = 0; i < std::max<int64_t>(o.reps, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r.tokens = train::generate(model, r.prompt, s);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  r.seconds = seconds[seconds.size() / 2];
  r.tokens_per_second = r.seconds > 0 ? static_cast<double>(o.new_tokens) / r.seconds : 0;
  return r;
}

}  // namespace gpulab::bench
