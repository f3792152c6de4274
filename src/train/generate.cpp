// KV-cached sampling loop (see generate.h).
#include "train/generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"

namespace gpulab::train {

std::vector<int64_t> generate(CausalLm& model, const std::vector<int64_t>& prompt,
                              const SamplingOptions& opts,
                              const std::function<void(int64_t)>& on_token) {
  const DecoderConfig& c = model.config();
  if (prompt.empty())
    throw Exception(Code::kInvalidArgument, "the prompt has no tokens",
                    "pass a non-empty --prompt");
  const auto total = static_cast<int64_t>(prompt.size()) + opts.max_new_tokens;
  if (total > c.max_positions)
    throw Exception(Code::kInvalidArgument,
                    "prompt (" + std::to_string(prompt.size()) + " tokens) + --max_new_tokens " +
                        std::to_string(opts.max_new_tokens) + " exceed " + c.name + "'s " +
                        std::to_string(c.max_positions) + " positions",
                    "shorten the prompt or lower --max_new_tokens");
  for (int64_t t : prompt)
    if (t < 0 || t >= c.vocab_size)
      throw Exception(Code::kInvalidArgument,
                      "prompt token " + std::to_string(t) +
                          " is outside the model's vocabulary of " + std::to_string(c.vocab_size),
                      "use the tokenizer the model was trained with");
  torch::NoGradGuard no_grad;
  model.eval();
  const auto device = model.parameters().front().device();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(opts.seed);
  KvCache cache;
  torch::Tensor input = torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < opts.max_new_tokens; ++i) {
    auto logits = model.forward(input, &cache).select(1, -1).squeeze(0).cpu();
    int64_t next = 0;
    if (opts.temperature <= 0) {
      // In the model's own precision: a float32 copy of float64 logits could tie two of them.
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits.to(torch::kFloat) / opts.temperature;
      if (opts.top_k > 0 && opts.top_k < logits.size(0)) {
        const auto kth = std::get<0>(logits.topk(opts.top_k)).min();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, 0), 1, false, gen).item<int64_t>();
    }
    out.push_back(next);
    if (on_token) on_token(next);
    input = torch::full({1, 1}, next, torch::TensorOptions().dtype(torch::kLong).device(device));
  }
  return out;
}

}  // namespace gpulab::train
