// Each language-model family as one row: its traits (what counting, planning and the tensor names
// need) and its Hugging Face config.json dialect, that is the model_type values it reads, its
// reader and its writer (llama_dialect.cpp for Llama, Mistral and Qwen2; gpt2_dialect.cpp for
// GPT-2). decoder_traits, decoder_config_from_json and DecoderConfig::to_json look a family up
// here: a new family adds its dialect's file and its row, and touches no reader.
#pragma once

#include <string_view>
#include <vector>

#include "formats/decoder_config.h"

namespace gpulab::formats {

struct DecoderFamily {
  std::string_view family;                   // DecoderConfig::family
  DecoderTraits traits;                      // traits.model_type is the one it writes
  std::vector<std::string_view> also_reads;  // other model_type values it reads (mistral)
  Result<DecoderConfig> (*read)(const Json& j, std::string_view what);  // fields checked
  Json (*write)(const DecoderConfig& c);                                // the family's own
};

// The rows, in the order errors list them; the first reads a config.json without model_type.
const std::vector<DecoderFamily>& decoder_families();

// The row of a family, or of a model_type it reads; null for none.
const DecoderFamily* family_row(std::string_view family);
const DecoderFamily* family_reading(std::string_view model_type);

Result<DecoderConfig> llama_config_from_json(const Json& j, std::string_view what);
Result<DecoderConfig> qwen2_config_from_json(const Json& j, std::string_view what);
Result<DecoderConfig> gpt2_config_from_json(const Json& j, std::string_view what);
Json llama_config_to_json(const DecoderConfig& c);
Json qwen2_config_to_json(const DecoderConfig& c);
Json gpt2_config_to_json(const DecoderConfig& c);

}  // namespace gpulab::formats
