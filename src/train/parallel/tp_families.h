// The families with a tensor-parallel model, one row each, and the factory that builds a rank's
// part of one (the one place that names the concrete TP models).
#pragma once

#include <memory>
#include <string>

#include "train/models/decoder_config.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_group.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

// Whether `family` has a tensor-parallel model, and the families that do ("llama, qwen2, gpt2").
bool has_tp_model(const std::string& family);
std::string tp_families();
// Whether the family's tensor-parallel model builds a pipeline stage's pieces alone (--tp with
// --pp), and the families whose does.
bool has_tp_stage_model(const std::string& family);
std::string tp_stage_families();

// The family's tensor-parallel model of `full` (the ordinary state dict, as the one-process
// model of the same seed holds it), this rank's shard of it. Throws kUnsupported for a family
// without one, kInvalidArgument for a TP size the shape does not fit. With a `part` (a pipeline
// stage's pieces; `full` then holds those alone) the rest are shapes on the meta device.
std::shared_ptr<TpCausalLm> build_tp_causal_lm(const DecoderConfig& c, TpGroup& group,
                                               const StateDict& full, const ModelPart& part = {});

// The same model, from the weights one process initialises on `device` from the same seed,
// without ever holding them all: the model is made first (its parameters allocated), then each
// ordinary tensor is drawn whole (the generator moves as for the whole model), cut to this rank's
// shard, copied in and freed. Peak memory: the rank's parameters and the largest single tensor.
// With a `part` (a pipeline stage's pieces) only those are allocated and filled; every tensor is
// still drawn, so the stage's values are the one-process model's.
std::shared_ptr<TpCausalLm> build_tp_causal_lm(const DecoderConfig& c, TpGroup& group,
                                               torch::Device device, const ModelPart& part = {});

}  // namespace gpulab::train::parallel
