// The language-model base's shared steps.
#include "train/models/causal_lm.h"

#include "core/error.h"
#include "train/models/activation_checkpoint.h"
#include "train/precision.h"
#include "train/unit_hooks.h"

namespace gpulab::train {

CausalLm::CausalLm(DecoderConfig c) : config_(std::move(c)) {
  if (auto st = config_.validate(); !st) throw Exception(st.error());
}

torch::Tensor CausalLm::begin_forward(const torch::Tensor& tokens, KvCache* cache) const {
  const int64_t t = tokens.size(1);
  if (cache && cache->keys.empty()) {
    cache->keys.resize(static_cast<size_t>(config_.num_layers));
    cache->values.resize(static_cast<size_t>(config_.num_layers));
  }
  KvCache none;
  auto positions = begin_step(cache ? *cache : none, tokens.size(0), t, tokens.device());
  // A padded row's last position is its own count of tokens, not the cache's width.
  const int64_t end = cache && cache->present.defined() ? positions.max().item<int64_t>() + 1
                                                        : (cache ? cache->length : 0) + t;
  if (end > config_.max_positions)
    throw Exception(Code::kInvalidArgument,
                    "sequence of " + std::to_string(end) + " positions is longer than " +
                        config_.name + "'s " + std::to_string(config_.max_positions),
                    "use a shorter --seq_len (or fewer --max_new_tokens)");
  return positions;
}

torch::Tensor CausalLm::head_input(const torch::Tensor& h, const KvCache* cache) {
  if (cache == nullptr || !cache->last_logits_only) return h;
  return h.narrow(1, h.size(1) - 1, 1);
}

void CausalLm::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) init_parameter(p.key(), p.value());
}

void CausalLm::init_parameter(const std::string& name, torch::Tensor& /*p*/) const {
  throw Exception(Code::kUnsupported, "this model cannot initialise " + name + " on its own",
                  "initialise the family's ordinary model");
}

void CausalLm::init_normal(torch::Tensor& p, double std) const {
  if (!p.is_meta()) {
    p.normal_(0.0, std);
    return;
  }
  for (const auto& q : parameters())
    if (!q.is_meta()) {
      torch::empty(p.sizes(), q.options()).normal_(0.0, std);
      return;
    }
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
  // Sharded data parallel gathers the block around this call (a plain call otherwise); with
  // recomputation above the block stays gathered, since its backward re-runs the forward.
  return run_unit(*block, [&] { return fn(h); });
}

}  // namespace gpulab::train
