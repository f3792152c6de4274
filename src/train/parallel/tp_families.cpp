// The families with a tensor-parallel model, one row each (tp_families.h).
#include "train/parallel/tp_families.h"

#include "core/error.h"
#include "train/parallel/tp_llama.h"
#include "train/parallel/tp_llama_state.h"

namespace gpulab::train::parallel {

namespace {

// Qwen2 is Llama's block with q/k/v biases, which split with their rows.
const char* const kTpFamilies[] = {"llama", "qwen2"};
// Those whose tensor-parallel model takes a ModelPart (a pipeline stage's pieces): TP x PP.
const char* const kTpStageFamilies[] = {"llama", "qwen2"};

}  // namespace

bool has_tp_model(const std::string& family) {
  for (const char* f : kTpFamilies)
    if (family == f) return true;
  return false;
}

std::string tp_families() {
  std::string out;
  for (const char* f : kTpFamilies) out += (out.empty() ? "" : ", ") + std::string(f);
  return out;
}

bool has_tp_stage_model(const std::string& family) {
  for (const char* f : kTpStageFamilies)
    if (family == f) return true;
  return false;
}

std::string tp_stage_families() {
  std::string out;
  for (const char* f : kTpStageFamilies) out += (out.empty() ? "" : ", ") + std::string(f);
  return out;
}

std::shared_ptr<TpCausalLm> build_tp_causal_lm(const DecoderConfig& c, TpGroup& group,
                                               const StateDict& full, const ModelPart& part) {
  if (!has_tp_model(c.family))
    throw Exception(Code::kUnsupported,
                    "the " + c.family + " family has no tensor-parallel model (" + c.name + ")",
                    "train it without --tp (data parallel or --shard), or pick a model of a "
                    "family with one: " +
                        tp_families());
  GPULAB_ASSERT(part.blocks.empty() || has_tp_stage_model(c.family),
                "a pipeline stage of a family whose tensor-parallel model takes no ModelPart");
  return std::make_shared<TpLlamaForCausalLM>(
      group, c, shard_state(c, full, group.rank(), group.size()), part);
}

}  // namespace gpulab::train::parallel
