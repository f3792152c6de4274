// The decoder families' table (decoder_dialects.h: each family's traits and config.json dialect),
// and reading and writing config.json through it.
#include <string>

#include "core/strings.h"
#include "formats/decoder_dialects.h"

namespace gpulab::formats {

const std::vector<DecoderFamily>& decoder_families() {
  static const std::vector<DecoderFamily> rows = {
      {"llama",
       {.model_type = "llama",
        .architecture = "LlamaForCausalLM",
        .token_embedding = "model.embed_tokens.weight"},
       {"mistral"},
       &llama_config_from_json,
       &llama_config_to_json},
      {"qwen2",
       {.qkv_biases = true,
        .model_type = "qwen2",
        .architecture = "Qwen2ForCausalLM",
        .token_embedding = "model.embed_tokens.weight"},
       {},
       &qwen2_config_from_json,
       &qwen2_config_to_json},
      {"gpt2",
       {.rotary = false,
        .gated_mlp = false,
        .biases = true,
        .norm_bias = true,
        .grouped_query = false,
        .model_type = "gpt2",
        .architecture = "GPT2LMHeadModel",
        .token_embedding = "transformer.wte.weight",
        .position_embedding = "transformer.wpe.weight"},
       {},
       &gpt2_config_from_json,
       &gpt2_config_to_json},
  };
  return rows;
}

const DecoderFamily* family_row(std::string_view family) {
  for (const auto& f : decoder_families())
    if (f.family == family) return &f;
  return nullptr;
}

namespace {

// The model_type values a row reads: the one it writes, then the others.
std::vector<std::string_view> model_types_of(const DecoderFamily& f) {
  std::vector<std::string_view> types = {f.traits.model_type};
  types.insert(types.end(), f.also_reads.begin(), f.also_reads.end());
  return types;
}

}  // namespace

const DecoderFamily* family_reading(std::string_view model_type) {
  for (const auto& f : decoder_families())
    for (auto t : model_types_of(f))
      if (t == model_type) return &f;
  return nullptr;
}

const DecoderTraits* decoder_traits(std::string_view family) {
  const auto* f = family_row(family);
  return f ? &f->traits : nullptr;
}

namespace {

// "llama, mistral, qwen2 or gpt2": every model_type a row reads.
std::string model_type_list() {
  std::vector<std::string_view> all;
  for (const auto& f : decoder_families())
    for (auto t : model_types_of(f)) all.push_back(t);
  std::string out;
  for (size_t i = 0; i < all.size(); ++i)
    out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i]);
  return out;
}

// The reader of the config's model_type; a config.json without one is read as Llama's (as before
// model_type was written).
Result<DecoderConfig> read_dialect(const Json& j, std::string_view what) {
  if (!j.contains("model_type") || j["model_type"].is_null())
    return decoder_families().front().read(j, what);
  const std::string type = j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (const auto* f = family_reading(type)) return f->read(j, what);
  return Error{
      Code::kInvalidArgument,
      std::string(what) + ": model_type " + printable(j["model_type"].dump()) + " is not supported",
      "gpulab reads the model_type " + model_type_list()};
}

}  // namespace

Json DecoderConfig::to_json() const {
  const auto* f = family_row(family);
  return (f ? f : &decoder_families().front())->write(*this);
}

Result<DecoderConfig> decoder_config_from_json(const Json& j, std::string_view what) {
  if (!j.is_object())
    return Error{Code::kInvalidArgument, std::string(what) + " is not a JSON object",
                 "pass a Hugging Face config.json"};
  auto c = read_dialect(j, what);
  if (!c) return c;
  if (auto st = c->validate(); !st) return st.error();
  return c;
}

}  // namespace gpulab::formats
