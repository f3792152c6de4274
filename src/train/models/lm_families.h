// The language-model families by name: build_causal_lm makes the model a DecoderConfig's family
// names. The one place that knows every family's class (each lives in its own files and
// includes only causal_lm.h).
#pragma once

#include <torch/torch.h>

#include "train/models/causal_lm.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {

// The model of `c.family`, built (and initialised) on `device`: a GPU run creates its weights
// there, not on the CPU. Only `part`'s pieces are (a pipeline stage's); the rest are shapes on
// the meta device.
CausalLmPtr build_causal_lm(const DecoderConfig& c, torch::Device device = torch::kCPU,
                            const ModelPart& part = {});

// A Hugging Face file's tensors under the names c.family's model has: the identity for a family
// whose hub files use its modules' names, a mapping where they differ (GPT-2's hub layout).
StateDict from_hf_names(const DecoderConfig& c, StateDict weights);

}  // namespace gpulab::train
