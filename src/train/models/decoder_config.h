// The shape of a decoder-only language model and Hugging Face config.json parsing: they live in
// formats/decoder_config.h, with no libtorch so the fuzz tree reads config files; the trainer
// names them as its own.
#pragma once

#include "formats/decoder_config.h"

namespace gpulab::train {

using formats::decoder_config_from_json;
using formats::decoder_shapes;
using formats::decoder_traits;
using formats::DecoderConfig;
using formats::DecoderTraits;
using formats::find_decoder_config;
using formats::is_language_model;

}  // namespace gpulab::train
