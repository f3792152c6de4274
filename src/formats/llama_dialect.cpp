// The Llama family's config.json dialect (decoder_dialects.h): Llama's field names, read for
// model_type llama and mistral (Mistral's sliding window bounds the positions) and, with q/k/v
// biases and its window off by default, for Qwen2; written back as the family's own.
#include <algorithm>
#include <optional>

#include "core/json_fields.h"
#include "core/strings.h"
#include "formats/config_json_fields.h"
#include "formats/decoder_dialects.h"

namespace gpulab::formats {
namespace {

// rope_theta: at the top level (transformers 4), or inside rope_parameters (transformers 5, with
// rope_type beside it; like rope_scaling, a type other than the default is not applied).
Result<std::optional<double>> rope_theta_of(const Json& j, std::string_view what) {
  const bool params = j.contains("rope_parameters") && j["rope_parameters"].is_object();
  if (optional_bad(j, "rope_parameters", params) ||
      optional_bad(j, "rope_theta", is_number(j, "rope_theta")) ||
      (params && optional_bad(j["rope_parameters"], "rope_theta",
                              is_number(j["rope_parameters"], "rope_theta"))))
    return Error{Code::kInvalidArgument,
                 std::string(what) + ": rope_theta must be a number, rope_parameters an object"};
  if (params && is_number(j["rope_parameters"], "rope_theta"))
    return std::optional<double>(j["rope_parameters"]["rope_theta"].get<double>());
  if (is_number(j, "rope_theta")) return std::optional<double>(j["rope_theta"].get<double>());
  return std::optional<double>();
}

// Mistral's sliding window: a query attends to keys fewer than sliding_window positions back.
// gpulab attends to every earlier position, which is the same for sequences up to the window,
// so the shape's positions end there (unless use_sliding_window says the window is off; Qwen2's
// is off unless it says on, as Qwen2Config reads it).
Result<std::optional<int64_t>> sliding_window_of(const Json& j, std::string_view what,
                                                 bool window_by_default) {
  if (optional_bad(j, "sliding_window", json_int64(j, "sliding_window").has_value()) ||
      optional_bad(j, "use_sliding_window", is_bool(j, "use_sliding_window")))
    return Error{Code::kInvalidArgument, std::string(what) +
                                             ": sliding_window must be an integer, "
                                             "use_sliding_window a bool"};
  const bool on =
      is_bool(j, "use_sliding_window") ? j["use_sliding_window"].get<bool>() : window_by_default;
  if (!on) return std::optional<int64_t>();
  return json_int64(j, "sliding_window");
}

Status llama_variant_fields(const Json& j, std::string_view what) {
  constexpr const char* kHint = "gpulab's Llama is SwiGLU (silu) with no biases";
  const std::pair<const char*, Json> fields[] = {
      {"hidden_act", "silu"}, {"attention_bias", false}, {"mlp_bias", false}};
  for (const auto& [field, want] : fields)
    if (auto st = only_value(j, field, want, what, kHint); !st) return st;
  return ok_status();
}

// Qwen2's q/k/v biases are part of the family (Qwen2Attention always has them); its MLP is
// Llama's.
Status qwen2_variant_fields(const Json& j, std::string_view what) {
  return only_value(j, "hidden_act", "silu", what, "gpulab's Qwen2 is SwiGLU (silu)");
}

// A config.json dialect with Llama's field names: the family it builds and what differs.
struct RotaryDialect {
  const char* family;
  Status (*variant_fields)(const Json&, std::string_view);
  bool window_by_default;  // sliding_window applies unless use_sliding_window is false
};

constexpr RotaryDialect kLlamaDialect{"llama", &llama_variant_fields, true};
constexpr RotaryDialect kQwen2Dialect{"qwen2", &qwen2_variant_fields, false};

Result<DecoderConfig> rotary_from_json(const Json& j, std::string_view what,
                                       const RotaryDialect& dialect) {
  std::string missing =
      missing_ints(j, {"hidden_size", "num_hidden_layers", "num_attention_heads",
                       "intermediate_size", "vocab_size", "max_position_embeddings"});
  if (!is_number(j, "rms_norm_eps"))
    missing += (missing.empty() ? "" : ", ") + std::string("rms_norm_eps");
  if (!missing.empty())
    return Error{Code::kInvalidArgument,
                 std::string(what) + " lacks integer or numeric field(s): " + missing,
                 "a Llama or Qwen2 config.json states hidden_size, num_hidden_layers, "
                 "num_attention_heads, intermediate_size, vocab_size, max_position_embeddings and "
                 "rms_norm_eps"};
  for (const char* f : {"num_key_value_heads", "head_dim"})
    if (optional_bad(j, f, json_int64(j, f).has_value()))
      return Error{Code::kInvalidArgument, std::string(what) + ": " + f + " is not an integer"};
  if (optional_bad(j, "tie_word_embeddings", is_bool(j, "tie_word_embeddings")))
    return Error{Code::kInvalidArgument, std::string(what) + ": tie_word_embeddings is not a bool"};
  auto theta = rope_theta_of(j, what);
  if (!theta) return theta.error();
  auto window = sliding_window_of(j, what, dialect.window_by_default);
  if (!window) return window.error();
  if (auto st = dialect.variant_fields(j, what); !st) return st.error();
  DecoderConfig c;
  c.family = dialect.family;
  c.name = std::string(what);
  c.hidden_size = *json_int64(j, "hidden_size");
  c.num_layers = *json_int64(j, "num_hidden_layers");
  c.num_heads = *json_int64(j, "num_attention_heads");
  c.intermediate_size = *json_int64(j, "intermediate_size");
  c.vocab_size = *json_int64(j, "vocab_size");
  c.max_positions = *json_int64(j, "max_position_embeddings");
  c.norm_eps = j["rms_norm_eps"].get<double>();
  c.num_kv_heads = json_int64(j, "num_key_value_heads").value_or(c.num_heads);
  if (*theta) c.rope_theta = **theta;
  if (*window && **window > 0) c.max_positions = std::min(c.max_positions, **window);
  if (is_bool(j, "tie_word_embeddings"))
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  c.head_dim = json_int64(j, "head_dim").value_or(0);
  if (c.num_heads > 0 && c.head_dim == c.hidden_size / c.num_heads) c.head_dim = 0;
  return c;
}

}  // namespace

Result<DecoderConfig> llama_config_from_json(const Json& j, std::string_view what) {
  return rotary_from_json(j, what, kLlamaDialect);
}

Result<DecoderConfig> qwen2_config_from_json(const Json& j, std::string_view what) {
  return rotary_from_json(j, what, kQwen2Dialect);
}

namespace {

// Llama's field names, as both rotary families write them.
Json rotary_json(const DecoderConfig& c) {
  const auto& t = c.traits();
  Json j{{"architectures", {t.architecture}},
         {"model_type", t.model_type},
         {"vocab_size", c.vocab_size},
         {"hidden_size", c.hidden_size},
         {"intermediate_size", c.intermediate_size},
         {"num_hidden_layers", c.num_layers},
         {"num_attention_heads", c.num_heads},
         {"num_key_value_heads", c.num_kv_heads},
         {"head_dim", c.dim_per_head()},
         {"max_position_embeddings", c.max_positions},
         {"rope_theta", c.rope_theta},
         {"rms_norm_eps", c.norm_eps},
         {"tie_word_embeddings", c.tie_word_embeddings},
         {"hidden_act", "silu"}};
  return j;
}

}  // namespace

Json llama_config_to_json(const DecoderConfig& c) {
  return rotary_json(c);
}

Json qwen2_config_to_json(const DecoderConfig& c) {
  Json j = rotary_json(c);
  // Qwen2Config defaults its window off; written anyway, so no reader has to know that.
  j["use_sliding_window"] = false;
  return j;
}

}  // namespace gpulab::formats
