// GPT-2's config.json dialect (decoder_dialects.h): transformers' GPT2Config names (n_embd,
// n_layer, ...), read with every missing or mistyped field named, and written back.
#include <limits>

#include "core/json_fields.h"
#include "core/strings.h"
#include "formats/config_json_fields.h"
#include "formats/decoder_dialects.h"

namespace gpulab::formats {
namespace {

Status gpt2_variant_fields(const Json& j, std::string_view what) {
  constexpr const char* kHint = "gpulab's GPT-2 scales attention scores by 1/sqrt(head_dim) only";
  if (auto st = only_value(j, "scale_attn_weights", true, what, kHint); !st) return st;
  return only_value(j, "scale_attn_by_inverse_layer_idx", false, what, kHint);
}

}  // namespace

// GPT-2's names, as transformers' GPT2Config: n_inner null means 4 x n_embd, the output head is
// tied unless tie_word_embeddings says false, and the MLP's GELU is the tanh approximation.
Result<DecoderConfig> gpt2_config_from_json(const Json& j, std::string_view what) {
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

Json gpt2_config_to_json(const DecoderConfig& c) {
  const auto& t = c.traits();
  return Json{{"architectures", {t.architecture}},
              {"model_type", t.model_type},
              {"vocab_size", c.vocab_size},
              {"n_embd", c.hidden_size},
              {"n_layer", c.num_layers},
              {"n_head", c.num_heads},
              {"n_inner", c.intermediate_size},
              {"n_positions", c.max_positions},
              {"n_ctx", c.max_positions},
              {"layer_norm_epsilon", c.norm_eps},
              {"tie_word_embeddings", c.tie_word_embeddings},
              {"activation_function", "gelu_new"}};
}

}  // namespace gpulab::formats
