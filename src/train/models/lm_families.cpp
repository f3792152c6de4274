// The family table behind build_causal_lm: one row per family.
#include "train/models/lm_families.h"

#include <string_view>

#include "core/error.h"
#include "train/models/gpt2/gpt2.h"
#include "train/models/llama/llama.h"

namespace gpulab::train {
namespace {

struct Family {
  std::string_view name;  // DecoderConfig::family
  CausalLmPtr (*build)(const DecoderConfig&, torch::Device, const ModelPart&);
  StateDict (*from_hf_names)(StateDict);  // null: a hub file names tensors as the modules do
};

template <class Model>
CausalLmPtr make(const DecoderConfig& c, torch::Device device, const ModelPart& part) {
  return std::make_shared<Model>(c, device, part);
}

// A family's shapes, traits and config.json dialect are in formats/decoder_config*.cpp.
constexpr Family kFamilies[] = {
    {"llama", &make<LlamaForCausalLM>, nullptr},
    // Llama's modules with q/k/v biases (qwen2's traits): one home for the shared blocks.
    {"qwen2", &make<LlamaForCausalLM>, nullptr},
    {"gpt2", &make<Gpt2LMHeadModel>, &gpt2_from_hub_names},
};

}  // namespace

CausalLmPtr build_causal_lm(const DecoderConfig& c, torch::Device device, const ModelPart& part) {
  for (const auto& f : kFamilies)
    if (f.name == c.family) return f.build(c, device, part);
  throw Exception(Code::kInvalidArgument, "model " + c.name + ": unknown family '" + c.family + "'",
                  "use a shape `gpulab models` lists, or a Llama, Qwen2 or GPT-2 config.json");
}

StateDict from_hf_names(const DecoderConfig& c, StateDict weights) {
  for (const auto& f : kFamilies)
    if (f.name == c.family && f.from_hf_names) return f.from_hf_names(std::move(weights));
  return weights;
}

}  // namespace gpulab::train
