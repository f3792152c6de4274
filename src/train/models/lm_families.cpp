// The family table behind build_causal_lm: one row per family.
#include "train/models/lm_families.h"

#include <string_view>

#include "core/error.h"
#include "train/models/gpt2/gpt2.h"
#include "train/models/llama.h"

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

// A family's shapes, traits and config.json dialect are in formats/decoder_config*.cpp.
constexpr Family kFamilies[] = {
    {"llama", &make<LlamaForCausalLM>},
    {"gpt2", &make<Gpt2LMHeadModel>},
};

}  // namespace

CausalLmPtr build_causal_lm(const DecoderConfig& c, torch::Device device) {
  for (const auto& f : kFamilies)
    if (f.name == c.family) return f.build(c, device);
  throw Exception(Code::kInvalidArgument, "model " + c.name + ": unknown family '" + c.family + "'",
                  "use a shape `gpulab models` lists, or a Llama or GPT-2 config.json");
}

}  // namespace gpulab::train
