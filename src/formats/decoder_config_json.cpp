// Hugging Face config.json for each decoder family: the dialects' table (decoder_dialects.h),
// and reading and writing through it.
#include <string>

#include "core/strings.h"
#include "formats/decoder_dialects.h"

namespace gpulab::formats {

const std::vector<ConfigDialect>& config_dialects() {
  static const std::vector<ConfigDialect> rows = {
      {"llama", {"llama", "mistral"}, &llama_config_from_json, &llama_config_to_json},
      {"qwen2", {"qwen2"}, &qwen2_config_from_json, &qwen2_config_to_json},
      {"gpt2", {"gpt2"}, &gpt2_config_from_json, &gpt2_config_to_json},
  };
  return rows;
}

const ConfigDialect* dialect_of_family(std::string_view family) {
  for (const auto& d : config_dialects())
    if (d.family == family) return &d;
  return nullptr;
}

const ConfigDialect* dialect_of_model_type(std::string_view model_type) {
  for (const auto& d : config_dialects())
    for (auto t : d.model_types)
      if (t == model_type) return &d;
  return nullptr;
}

namespace {

// "llama, mistral, qwen2 or gpt2": every model_type a row reads.
std::string model_type_list() {
  std::vector<std::string_view> all;
  for (const auto& d : config_dialects())
    all.insert(all.end(), d.model_types.begin(), d.model_types.end());
  std::string out;
  for (size_t i = 0; i < all.size(); ++i)
    out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i]);
  return out;
}

// The reader of the config's model_type; a config.json without one is read as Llama's (as before
// model_type was written).
Result<DecoderConfig> read_dialect(const Json& j, std::string_view what) {
  if (!j.contains("model_type") || j["model_type"].is_null())
    return config_dialects().front().read(j, what);
  const std::string type = j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (const auto* d = dialect_of_model_type(type)) return d->read(j, what);
  return Error{
      Code::kInvalidArgument,
      std::string(what) + ": model_type " + printable(j["model_type"].dump()) + " is not supported",
      "gpulab reads the model_type " + model_type_list()};
}

}  // namespace

Json DecoderConfig::to_json() const {
  const auto* d = dialect_of_family(family);
  return (d ? d : &config_dialects().front())->write(*this);
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
