// The shape of a Llama-style decoder and Hugging Face config.json parsing: they live in
// formats/llama_config.h, with no libtorch so the fuzz tree reads config files; the trainer
// names them as its own.
#pragma once

#include "formats/llama_config.h"

namespace gpulab::train {

using formats::find_llama_config;
using formats::is_language_model;
using formats::llama_config_from_json;
using formats::llama_shapes;
using formats::LlamaConfig;

}  // namespace gpulab::train
