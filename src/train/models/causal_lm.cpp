// The language-model base's shared steps, and the family table build_causal_lm reads.
#include "train/models/causal_lm.h"

#include <string_view>

#include "core/error.h"
#include "train/models/activation_checkpoint.h"
#include "train/models/gpt2/gpt2.h"
#include "train/models/llama.h"
#include "train/precision.h"
#include "train/unit_hooks.h"

namespace gpulab::train {
namespace {

struct Family {
  std::string_view name;  // DecoderConfig::family
  CausalLmPtr (*build)(const DecoderConfig&, torch::Device);
};

template <class Model>
CausalLmPtr make(const DecoderConfig& c, torch::Device device) {
  return std::make_shared<Model>(c, device);
}

// One row per family (formats/decoder_config.cpp holds its shapes and config.json dialect).
constexpr Family kFamilies[] = {
    {"llama", &make<LlamaForCausalLM>},
    {"gpt2", &make<Gpt2LMHeadModel>},
};

}  // namespace

CausalLm::CausalLm(DecoderConfig c) : config_(std::move(c)) {
  if (auto st = config_.validate(); !st) throw Exception(st.error());
}

int64_t CausalLm::begin_forward(const torch::Tensor& tokens, KvCache* cache) const {
  const int64_t start = cache ? cache->length : 0, t = tokens.size(1);
  if (start + t > config_.max_positions)
    throw Exception(Code::kInvalidArgument,
                    "sequence of " + std::to_string(start + t) + " positions is longer than " +
                        config_.name + "'s " + std::to_string(config_.max_positions),
                    "use a shorter --seq_len (or fewer --max_new_tokens)");
  if (cache && cache->keys.empty()) {
    cache->keys.resize(static_cast<size_t>(config_.num_layers));
    cache->values.resize(static_cast<size_t>(config_.num_layers));
  }
  return start;
}

torch::Tensor CausalLm::run_block(const std::shared_ptr<torch::nn::Module>& block,
                                  const torch::Tensor& h,
                                  std::function<torch::Tensor(const torch::Tensor&)> fn) const {
  if (checkpointing_ && is_training() && torch::GradMode::is_enabled()) {
    // The recomputation runs under the autocast this forward pass runs under.
    const Precision autocast = active_autocast(h.device());
    const torch::Device device = h.device();
    auto recompute = [block, fn = std::move(fn), autocast, device](const torch::Tensor& x) {
      AutocastGuard guard(autocast, device);
      return fn(x);
    };
    return checkpointed(recompute, h, block->parameters());
  }
  // With recomputation the block stays gathered instead: its backward re-runs the forward itself.
  return run_unit(*block, [&] { return fn(h); });
}

CausalLmPtr build_causal_lm(const DecoderConfig& c, torch::Device device) {
  for (const auto& f : kFamilies)
    if (f.name == c.family) return f.build(c, device);
  throw Exception(Code::kInvalidArgument, "model " + c.name + ": unknown family '" + c.family + "'",
                  "use a shape `gpulab models` lists, or a Llama or GPT-2 config.json");
}

}  // namespace gpulab::train
