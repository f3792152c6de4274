// KV-cached generation loop (see generate.h).
#include "train/generate.h"

#include "core/error.h"
#include "train/ops/packed_linear.h"

namespace gpulab::train {

void check_generation_prompt(const DecoderConfig& c, const std::vector<int64_t>& prompt,
                             const SamplingOptions& opts, const std::string& which) {
  if (prompt.empty())
    throw Exception(Code::kInvalidArgument, which + " has no tokens", "pass a non-empty prompt");
  const auto total = static_cast<int64_t>(prompt.size()) + opts.max_new_tokens;
  if (total > c.max_positions)
    throw Exception(Code::kInvalidArgument,
                    which + " (" + std::to_string(prompt.size()) + " tokens) + --max_new_tokens " +
                        std::to_string(opts.max_new_tokens) + " exceed " + c.name + "'s " +
                        std::to_string(c.max_positions) + " positions",
                    "shorten the prompt or lower --max_new_tokens");
  for (int64_t t : prompt)
    if (t < 0 || t >= c.vocab_size)
      throw Exception(Code::kInvalidArgument,
                      which + ": token " + std::to_string(t) +
                          " is outside the model's vocabulary of " + std::to_string(c.vocab_size),
                      "use the tokenizer the model was trained with");
}

std::vector<std::vector<int64_t>> generate_rows(CausalLm& model, const std::vector<int64_t>& prompt,
                                                int64_t rows, const SamplingOptions& opts,
                                                TokenSampler& sampler, const OnRowToken& on_token) {
  GPULAB_ASSERT(rows > 0, "generate_rows needs at least one row");
  check_generation_prompt(model.config(), prompt, opts, "the prompt");
  torch::NoGradGuard no_grad;
  model.eval();
  const auto device = model.parameters().front().device();
  const auto longs = torch::TensorOptions().dtype(torch::kLong);
  KvCache cache;
  cache.last_logits_only = true;
  cache.reserve = static_cast<int64_t>(prompt.size()) + opts.max_new_tokens;
  // The ids each row has seen, for the repetition penalty (kept only when it applies).
  const bool keep_history = sampler.settings().repetition_penalty != 1.0;
  torch::Tensor history = torch::tensor(prompt, longs).unsqueeze(0).repeat({rows, 1});
  torch::Tensor input = history.to(device);
  torch::Tensor finished = torch::zeros({rows}, torch::kBool);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(rows));
  const int64_t pad = opts.eos_id >= 0 ? opts.eos_id : 0;
  PackedWeights packed;  // each weight packed once for every step (where the rows are enough)
  for (int64_t i = 0; i < opts.max_new_tokens; ++i) {
    const auto logits = model.forward(input, &cache).select(1, -1);
    const auto next = sampler.next(logits, keep_history ? history : torch::Tensor(), finished, pad);
    const auto* ids = next.data_ptr<int64_t>();
    bool* done = finished.data_ptr<bool>();  // CPU: read and set in place, no tensor per row
    for (int64_t r = 0; r < rows; ++r) {
      if (done[r]) continue;
      out[static_cast<size_t>(r)].push_back(ids[r]);
      if (on_token && !on_token(r, ids[r])) done[r] = true;
    }
    TokenSampler::mark_finished(finished, next, opts.eos_id);
    if (finished.all().item<bool>()) break;
    if (keep_history) history = torch::cat({history, next.unsqueeze(1)}, 1);
    input = next.unsqueeze(1).to(device);
  }
  return out;
}

std::vector<int64_t> generate(CausalLm& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& opts,
                              const std::function<void(int64_t)>& on_token) {
  TokenSampler sampler(opts, opts.seed);
  auto rows = generate_rows(model, prompt, 1, opts, sampler, [&](int64_t, int64_t t) {
    if (on_token) on_token(t);
    return true;
  });
  return std::move(rows.front());
}

}  // namespace gpulab::train
