// One Llama on two attention paths (the attention kernels' tests): a float64 llama-tiny with
// grouped-query heads (2 kv heads), the logits and every parameter's gradient of one backward pass
// on each path; the gradients must agree to float64 rounding.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "support/tensor_diff.h"
#include "train/models/llama/llama.h"

namespace gpulab::train {

// choose(model, first) puts the model on the first path (true) or the second (false). Checks the
// gradients (1e-12) and returns the logits' relative difference, for the caller's own bounds.
inline double compare_llama_attention_paths(
    int64_t positions, const std::function<void(LlamaForCausalLM&, bool)>& choose) {
  DecoderConfig c = find_decoder_config("llama-tiny").value_or_throw();
  c.num_kv_heads = 2;
  torch::manual_seed(0);
  LlamaForCausalLM model(c);
  model.to(torch::kDouble);
  auto tokens = torch::randint(0, c.vocab_size, {2, positions}, torch::kLong);
  auto run = [&](bool first) {
    choose(model, first);
    model.zero_grad();
    auto logits = model.forward(tokens);
    logits.pow(2).mean().backward();
    std::vector<torch::Tensor> grads;
    for (auto& p : model.parameters()) grads.push_back(p.grad().clone());
    return std::pair{logits.detach(), grads};
  };
  const auto [first_logits, first_grads] = run(true);
  const auto [second_logits, second_grads] = run(false);
  EXPECT_EQ(first_grads.size(), second_grads.size());
  for (size_t i = 0; i < first_grads.size() && i < second_grads.size(); ++i)
    EXPECT_LE(gpulab::test::relative_diff(first_grads[i], second_grads[i]), 1e-12)
        << "parameter " << i;
  return gpulab::test::relative_diff(first_logits, second_logits);
}

}  // namespace gpulab::train
