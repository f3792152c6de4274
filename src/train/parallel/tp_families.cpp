// The families with a tensor-parallel model, one row each (tp_families.h).
#include "train/parallel/tp_families.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "core/error.h"
#include "train/models/lm_families.h"
#include "train/parallel/tp_gpt2.h"
#include "train/parallel/tp_gpt2_state.h"
#include "train/parallel/tp_llama.h"
#include "train/parallel/tp_llama_state.h"

namespace gpulab::train::parallel {

namespace {

struct TpFamily {
  const char* name;  // DecoderConfig::family
  // Rank `rank`'s shard of (part of) the ordinary state dict, and the model built from a shard.
  StateDict (*shard)(const DecoderConfig&, const StateDict&, int rank, int tp);
  // A ModelPart with blocks names a pipeline stage's pieces (only for `stages` families).
  std::shared_ptr<TpCausalLm> (*build)(const DecoderConfig&, TpGroup&, const StateDict& shard,
                                       const ModelPart& part);
  bool stages;  // its TP model takes a ModelPart: --tp with --pp
};

template <class Model>
std::shared_ptr<TpCausalLm> make_part(const DecoderConfig& c, TpGroup& g, const StateDict& shard,
                                      const ModelPart& part) {
  return std::make_shared<Model>(g, c, shard, part);
}

// Qwen2 is Llama's block with q/k/v biases, which split with their rows. Every family's TP model
// takes a ModelPart (a pipeline stage's pieces): --tp with --pp.
const TpFamily kTpFamilies[] = {
    {"llama", &shard_state, &make_part<TpLlamaForCausalLM>, true},
    {"qwen2", &shard_state, &make_part<TpLlamaForCausalLM>, true},
    {"gpt2", &gpt2_shard_state, &make_part<TpGpt2LMHeadModel>, true},
};

// The family's TP model with its parameters allocated but not yet filled. Its layers' own random
// initialisation, which the filled weights replace, is undone on the CPU generator, so the
// weights are drawn from where one process draws them.
std::shared_ptr<TpCausalLm> unfilled_model(const TpFamily& f, const DecoderConfig& c, TpGroup& g,
                                           const ModelPart& part) {
  auto generator = at::detail::getDefaultCPUGenerator();
  torch::Tensor state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  auto model = f.build(c, g, StateDict{}, part);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
  return model;
}

const TpFamily* find_tp_family(const std::string& family) {
  for (const auto& f : kTpFamilies)
    if (family == f.name) return &f;
  return nullptr;
}

}  // namespace

bool has_tp_model(const std::string& family) {
  return find_tp_family(family) != nullptr;
}

std::string tp_families() {
  std::string out;
  for (const auto& f : kTpFamilies) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

bool has_tp_stage_model(const std::string& family) {
  const TpFamily* f = find_tp_family(family);
  return f != nullptr && f->stages;
}

std::string tp_stage_families() {
  std::string out;
  for (const auto& f : kTpFamilies)
    if (f.stages) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::shared_ptr<TpCausalLm> build_tp_causal_lm(const DecoderConfig& c, TpGroup& group,
                                               const StateDict& full, const ModelPart& part) {
  const TpFamily* family = find_tp_family(c.family);
  if (family == nullptr)
    throw Exception(Code::kUnsupported,
                    "the " + c.family + " family has no tensor-parallel model (" + c.name + ")",
                    "train it without --tp (data parallel or --shard), or pick a model of a "
                    "family with one: " +
                        tp_families());
  GPULAB_ASSERT(part.blocks.empty() || family->stages,
                "a pipeline stage of a family whose tensor-parallel model takes no ModelPart");
  return family->build(c, group, family->shard(c, full, group.rank(), group.size()), part);
}

std::shared_ptr<TpCausalLm> build_tp_causal_lm(const DecoderConfig& c, TpGroup& group,
                                               torch::Device device, const ModelPart& part) {
  const TpFamily* family = find_tp_family(c.family);
  if (family == nullptr) return build_tp_causal_lm(c, group, StateDict{});  // the refusal
  GPULAB_ASSERT(part.blocks.empty() || family->stages,
                "a pipeline stage of a family whose tensor-parallel model takes no ModelPart");
  auto model = unfilled_model(*family, c, group, part);
  auto params = model->named_parameters();
  size_t held = 0;
  for (const auto& p : params) held += p.value().is_meta() ? 0 : 1;
  // The ordinary model as shapes alone (every piece on the meta device: no memory, no draws).
  ModelPart none;
  none.blocks.assign(static_cast<size_t>(c.num_layers), false);
  none.embedding = none.head = false;
  const CausalLmPtr shapes = build_causal_lm(c, device, none);
  torch::NoGradGuard no_grad;
  size_t filled = 0;
  for (const auto& p : shapes->named_parameters()) {
    // Drawn whole, as one process draws it (same generator, same order), cut, and freed.
    auto whole = torch::empty(p.value().sizes(), p.value().options().device(device));
    shapes->init_parameter(p.key(), whole);
    for (const auto& [name, piece] :
         family->shard(c, {{p.key(), whole}}, group.rank(), group.size())) {
      auto* mine = params.find(name);
      GPULAB_ASSERT(mine != nullptr && mine->sizes() == piece.sizes(),
                    "a shard tensor the tensor-parallel model does not hold");
      if (mine->is_meta()) continue;  // another pipeline stage's
      mine->copy_(piece);
      ++filled;
    }
  }
  GPULAB_ASSERT(filled == held, "a tensor-parallel parameter left unfilled");
  return model;
}

}  // namespace gpulab::train::parallel
