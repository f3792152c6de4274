// The language-model families by name: build_causal_lm makes the model a DecoderConfig's family
// names. The one place that knows every family's class (each lives in its own files and
// includes only causal_lm.h).
#pragma once

#include <torch/torch.h>

#include "train/models/causal_lm.h"

namespace gpulab::train {

// The model of `c.family`, built (and initialised) on `device`: a GPU run creates its weights
// there, not on the CPU.
CausalLmPtr build_causal_lm(const DecoderConfig& c, torch::Device device = torch::kCPU);

}  // namespace gpulab::train
