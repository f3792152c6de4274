// Hugging Face config.json for each decoder family: Llama's fields (llama, mistral, and Qwen2's
// dialect of them) and GPT-2's (n_embd, n_layer, ...), read with every missing or mistyped field
// named, and written back.
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "core/json_fields.h"
#include "core/strings.h"
#include "formats/decoder_config.h"

namespace gpulab::formats {
namespace {

// Required integer fields absent or not integers, comma-separated. Sizes must be integers: a
// float (or 1e300) would be cast, not read.
std::string missing_ints(const Json& j, std::initializer_list<const char*> fields) {
  std::string missing;
  for (const char* f : fields)
    if (!json_int64(j, f)) missing += (missing.empty() ? "" : ", ") + std::string(f);
  return missing;
}

// An optional field: absent or null means the default, any other wrong type is an error.
bool optional_bad(const Json& j, const char* f, bool ok_type) {
  return j.contains(f) && !j[f].is_null() && !ok_type;
}

bool is_number(const Json& j, const char* f) {
  return j.contains(f) && j[f].is_number();
}

bool is_bool(const Json& j, const char* f) {
  return j.contains(f) && j[f].is_boolean();
}

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

// A field whose value would make another model than the family's modules compute: refused rather
// than read as the default. `want` is the one value gpulab's modules implement.
Status only_value(const Json& j, const char* field, const Json& want, std::string_view what,
                  const char* hint) {
  if (!j.contains(field) || j[field].is_null() || j[field] == want) return ok_status();
  return Status(Code::kInvalidArgument,
                std::string(what) + ": " + field + " " + printable(j[field].dump()) +
                    " is not supported (only " + want.dump() + ")",
                hint);
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

Status gpt2_variant_fields(const Json& j, std::string_view what) {
  constexpr const char* kHint = "gpulab's GPT-2 scales attention scores by 1/sqrt(head_dim) only";
  if (auto st = only_value(j, "scale_attn_weights", true, what, kHint); !st) return st;
  return only_value(j, "scale_attn_by_inverse_layer_idx", false, what, kHint);
}

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

// GPT-2's names, as transformers' GPT2Config: n_inner null means 4 x n_embd, the output head is
// tied unless tie_word_embeddings says false, and the MLP's GELU is the tanh approximation.
Result<DecoderConfig> gpt2_from_json(const Json& j, std::string_view what) {
  const std::string missing = missing_ints(j, {"n_embd", "n_layer", "n_head", "vocab_size"});
  if (!missing.empty())
    return Error{Code::kInvalidArgument, std::string(what) + " lacks integer field(s): " + missing,
                 "a GPT-2 config.json states n_embd, n_layer, n_head, vocab_size (and "
                 "n_positions)"};
  for (const char* f : {"n_inner", "n_positions"})
    if (optional_bad(j, f, json_int64(j, f).has_value()))
      return Error{Code::kInvalidArgument, std::string(what) + ": " + f + " is not an integer"};
  if (optional_bad(j, "layer_norm_epsilon", is_number(j, "layer_norm_epsilon")) ||
      optional_bad(j, "tie_word_embeddings", is_bool(j, "tie_word_embeddings")))
    return Error{Code::kInvalidArgument, std::string(what) +
                                             ": layer_norm_epsilon must be a number, "
                                             "tie_word_embeddings a bool"};
  if (optional_bad(j, "activation_function",
                   j.contains("activation_function") && j["activation_function"].is_string()))
    return Error{Code::kInvalidArgument,
                 std::string(what) + ": activation_function is not a string"};
  if (auto st = gpt2_variant_fields(j, what); !st) return st.error();
  const std::string act = j.contains("activation_function") && j["activation_function"].is_string()
                              ? j["activation_function"].get<std::string>()
                              : "gelu_new";
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    return Error{
        Code::kInvalidArgument,
        std::string(what) + ": activation_function '" + printable(act) + "' is not supported",
        "gpulab's GPT-2 uses the tanh GELU (gelu_new)"};
  DecoderConfig c;
  c.family = "gpt2";
  c.name = std::string(what);
  c.hidden_size = *json_int64(j, "n_embd");
  c.num_layers = *json_int64(j, "n_layer");
  c.num_heads = c.num_kv_heads = *json_int64(j, "n_head");
  c.vocab_size = *json_int64(j, "vocab_size");
  c.max_positions = json_int64(j, "n_positions").value_or(1024);
  // 4 x n_embd unless given; a hostile n_embd past 2^61 must not overflow (validate refuses it).
  constexpr int64_t kMaxWidth = std::numeric_limits<int64_t>::max() / 4;
  c.intermediate_size =
      json_int64(j, "n_inner")
          .value_or(c.hidden_size > kMaxWidth ? std::numeric_limits<int64_t>::max()
                                              : 4 * c.hidden_size);
  if (is_number(j, "layer_norm_epsilon")) c.norm_eps = j["layer_norm_epsilon"].get<double>();
  c.tie_word_embeddings =
      is_bool(j, "tie_word_embeddings") ? j["tie_word_embeddings"].get<bool>() : true;
  return c;
}

// The reader of each model_type; a config.json without one is read as Llama's (as before
// model_type was written).
Result<DecoderConfig> read_dialect(const Json& j, std::string_view what) {
  if (!j.contains("model_type") || j["model_type"].is_null())
    return rotary_from_json(j, what, kLlamaDialect);
  const std::string type = j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  if (type == "llama" || type == "mistral") return rotary_from_json(j, what, kLlamaDialect);
  if (type == "qwen2") return rotary_from_json(j, what, kQwen2Dialect);
  if (type == "gpt2") return gpt2_from_json(j, what);
  return Error{
      Code::kInvalidArgument,
      std::string(what) + ": model_type " + printable(j["model_type"].dump()) + " is not supported",
      "gpulab reads the model_type llama, mistral, qwen2 or gpt2"};
}

}  // namespace

Json DecoderConfig::to_json() const {
  const auto& t = traits();
  if (family == "gpt2")
    return Json{{"architectures", {t.architecture}},
                {"model_type", t.model_type},
                {"vocab_size", vocab_size},
                {"n_embd", hidden_size},
                {"n_layer", num_layers},
                {"n_head", num_heads},
                {"n_inner", intermediate_size},
                {"n_positions", max_positions},
                {"n_ctx", max_positions},
                {"layer_norm_epsilon", norm_eps},
                {"tie_word_embeddings", tie_word_embeddings},
                {"activation_function", "gelu_new"}};
  Json j{{"architectures", {t.architecture}},
         {"model_type", t.model_type},
         {"vocab_size", vocab_size},
         {"hidden_size", hidden_size},
         {"intermediate_size", intermediate_size},
         {"num_hidden_layers", num_layers},
         {"num_attention_heads", num_heads},
         {"num_key_value_heads", num_kv_heads},
         {"head_dim", dim_per_head()},
         {"max_position_embeddings", max_positions},
         {"rope_theta", rope_theta},
         {"rms_norm_eps", norm_eps},
         {"tie_word_embeddings", tie_word_embeddings},
         {"hidden_act", "silu"}};
  // Qwen2Config defaults its window off; written anyway, so no reader has to know that.
  if (family == "qwen2") j["use_sliding_window"] = false;
  return j;
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
