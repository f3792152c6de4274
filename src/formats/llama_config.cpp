// Llama shapes: the named table, config.json parsing, and parameter / FLOP counts from a shape.
#include "formats/llama_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/json_fields.h"

namespace gpulab::formats {
namespace {

constexpr double kMaxParameters = 1e15;
constexpr double kMaxPositions = 2147483648.0;
constexpr uintmax_t kMaxConfigBytes = 16 << 20;  // real ones are a few KB

LlamaConfig shape(std::string name, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers,
                  int64_t heads, int64_t kv_heads, int64_t max_pos, double theta, bool tied,
                  bool vocab_from_data) {
  LlamaConfig c;
  c.name = std::move(name);
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.max_positions = max_pos;
  c.rope_theta = theta;
  c.tie_word_embeddings = tied;
  c.vocab_from_data = vocab_from_data;
  return c;
}

std::string llama_key(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '_') c = '-';
  }
  return out;
}

std::filesystem::path config_path(std::string_view name) {
  std::filesystem::path p(name);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) return p / "config.json";
  return p;
}

}  // namespace

int64_t LlamaConfig::num_parameters() const {
  const int64_t d = hidden_size, hd = dim_per_head();
  const int64_t attn = d * num_heads * hd * 2 + d * num_kv_heads * hd * 2;
  const int64_t block = attn + 3 * d * intermediate_size + 2 * d;
  return vocab_size * d * (tie_word_embeddings ? 1 : 2) + num_layers * block + d;
}

int64_t LlamaConfig::matmul_parameters() const {
  const int64_t d = hidden_size, hd = dim_per_head();
  const int64_t attn = d * num_heads * hd * 2 + d * num_kv_heads * hd * 2;
  return num_layers * (attn + 3 * d * intermediate_size) + vocab_size * d;
}

double LlamaConfig::train_flops_per_token(int64_t seq_len) const {
  return 6.0 * static_cast<double>(matmul_parameters()) +
         12.0 * static_cast<double>(num_layers) * static_cast<double>(num_heads) *
             static_cast<double>(dim_per_head()) * static_cast<double>(seq_len);
}

Status LlamaConfig::validate() const {
  const auto bad = [&](const std::string& what) {
    return Status(Code::kInvalidArgument, "model " + name + ": " + what,
                  "fix the shape (config.json fields or the named shape)");
  };
  if (vocab_size < 1 || hidden_size < 1 || intermediate_size < 1 || num_layers < 1 ||
      num_heads < 1 || num_kv_heads < 1 || max_positions < 1 || head_dim < 0)
    return bad("sizes must be positive");
  // Counted in floating point first: a shape past 10^15 parameters (a hostile config.json) would
  // overflow the integer counts that plans and reports use.
  const double d = static_cast<double>(hidden_size),
               hd = static_cast<double>(head_dim > 0 ? head_dim : hidden_size / num_heads);
  const double params =
      static_cast<double>(vocab_size) * d * 2 +
      static_cast<double>(num_layers) *
          (d * (static_cast<double>(num_heads) + static_cast<double>(num_kv_heads)) * hd * 2 +
           3 * d * static_cast<double>(intermediate_size) + 2 * d);
  if (params > kMaxParameters || static_cast<double>(max_positions) > kMaxPositions)
    return bad("the shape is implausibly large (over 10^15 parameters or 2^31 positions)");
  if (head_dim <= 0 && hidden_size % num_heads != 0)
    return bad("hidden_size " + std::to_string(hidden_size) + " is not a multiple of " +
               std::to_string(num_heads) + " heads");
  if (num_heads % num_kv_heads != 0)
    return bad("num_attention_heads " + std::to_string(num_heads) +
               " is not a multiple of num_key_value_heads " + std::to_string(num_kv_heads));
  if (dim_per_head() % 2 != 0) return bad("rotary embeddings need an even head dimension");
  if (!(rope_theta > 0) || !(rms_norm_eps > 0))
    return bad("rope_theta and rms_norm_eps must be > 0");
  return ok_status();
}

Json LlamaConfig::to_json() const {
  return Json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"vocab_size", vocab_size},
              {"hidden_size", hidden_size},
              {"intermediate_size", intermediate_size},
              {"num_hidden_layers", num_layers},
              {"num_attention_heads", num_heads},
              {"num_key_value_heads", num_kv_heads},
              {"head_dim", dim_per_head()},
              {"max_position_embeddings", max_positions},
              {"rope_theta", rope_theta},
              {"rms_norm_eps", rms_norm_eps},
              {"tie_word_embeddings", tie_word_embeddings},
              {"hidden_act", "silu"}};
}

const std::vector<LlamaConfig>& llama_shapes() {
  // Published sizes: Llama 3 8B / 70B (Meta's config.json), Mistral 7B v0.1, Llama 3.2 1B.
  // llama-tiny and llama-125m are ours (GPT-3 small's width and depth, with GQA).
  static const std::vector<LlamaConfig> table = {
      shape("llama-tiny", 4096, 256, 688, 4, 8, 8, 1024, 10000, false, true),
      shape("llama-125m", 32000, 768, 2048, 12, 12, 4, 2048, 10000, false, true),
      shape("llama-1b", 128256, 2048, 8192, 16, 32, 8, 131072, 500000, true, false),
      shape("llama3-8b", 128256, 4096, 14336, 32, 32, 8, 8192, 500000, false, false),
      shape("llama3-70b", 128256, 8192, 28672, 80, 64, 8, 8192, 500000, false, false),
      shape("mistral-7b", 32000, 4096, 14336, 32, 32, 8, 32768, 10000, false, false),
  };
  return table;
}

bool is_language_model(std::string_view name) {
  const std::string key = llama_key(name);
  for (const auto& c : llama_shapes())
    if (c.name == key) return true;
  const auto p = config_path(name);
  return p.extension() == ".json";
}

Result<LlamaConfig> llama_config_from_json(const Json& j, std::string_view what) {
  if (!j.is_object())
    return Error{Code::kInvalidArgument, std::string(what) + " is not a JSON object",
                 "pass a Hugging Face config.json"};
  // Fields a LlamaConfig must state; the others default as in transformers' LlamaConfig. Sizes
  // must be integers: a float (or 1e300) would be cast, not read.
  static const char* required_ints[] = {"hidden_size",         "num_hidden_layers",
                                        "num_attention_heads", "intermediate_size",
                                        "vocab_size",          "max_position_embeddings"};
  std::string missing;
  for (const char* f : required_ints)
    if (!json_int64(j, f)) missing += (missing.empty() ? "" : ", ") + std::string(f);
  if (!j.contains("rms_norm_eps") || !j["rms_norm_eps"].is_number())
    missing += (missing.empty() ? "" : ", ") + std::string("rms_norm_eps");
  if (!missing.empty())
    return Error{Code::kInvalidArgument,
                 std::string(what) + " lacks integer or numeric field(s): " + missing,
                 "a Llama config.json states hidden_size, num_hidden_layers, num_attention_heads, "
                 "intermediate_size, vocab_size, max_position_embeddings and rms_norm_eps"};
  // Optional fields: null means the default, any other wrong type is an error.
  const auto optional_bad = [&](const char* f, bool ok_type) {
    return j.contains(f) && !j[f].is_null() && !ok_type;
  };
  for (const char* f : {"num_key_value_heads", "head_dim"})
    if (optional_bad(f, json_int64(j, f).has_value()))
      return Error{Code::kInvalidArgument, std::string(what) + ": " + f + " is not an integer"};
  if (optional_bad("rope_theta", j.contains("rope_theta") && j["rope_theta"].is_number()) ||
      optional_bad("tie_word_embeddings",
                   j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean()))
    return Error{Code::kInvalidArgument,
                 std::string(what) + ": rope_theta must be a number, tie_word_embeddings a bool"};
  LlamaConfig c;
  c.name = std::string(what);
  c.hidden_size = *json_int64(j, "hidden_size");
  c.num_layers = *json_int64(j, "num_hidden_layers");
  c.num_heads = *json_int64(j, "num_attention_heads");
  c.intermediate_size = *json_int64(j, "intermediate_size");
  c.vocab_size = *json_int64(j, "vocab_size");
  c.max_positions = *json_int64(j, "max_position_embeddings");
  c.rms_norm_eps = j["rms_norm_eps"].get<double>();
  c.num_kv_heads = json_int64(j, "num_key_value_heads").value_or(c.num_heads);
  if (j.contains("rope_theta") && j["rope_theta"].is_number())
    c.rope_theta = j["rope_theta"].get<double>();
  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean())
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  c.head_dim = json_int64(j, "head_dim").value_or(0);
  if (c.num_heads > 0 && c.head_dim == c.hidden_size / c.num_heads) c.head_dim = 0;
  if (auto st = c.validate(); !st) return st.error();
  return c;
}

Result<LlamaConfig> find_llama_config(std::string_view name_or_path) {
  const std::string key = llama_key(name_or_path);
  for (const auto& c : llama_shapes())
    if (c.name == key) return c;
  const auto path = config_path(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) &&
      std::filesystem::file_size(path, ec) > kMaxConfigBytes)
    return Error{Code::kInvalidArgument,
                 path.string() + " is over 16 MiB: not a Hugging Face config.json"};
  std::ifstream in(path);
  if (!in) {
    std::string names;
    for (const auto& c : llama_shapes()) names += (names.empty() ? "" : ", ") + c.name;
    return Error{Code::kInvalidArgument, "no language model '" + std::string(name_or_path) + "'",
                 "use one of " + names + ", or a Hugging Face config.json (or its folder)"};
  }
  std::stringstream text;
  text << in.rdbuf();
  auto j = parse_json(text.str(), path.string());
  if (!j) return j.error();
  return llama_config_from_json(*j, path.string());
}

}  // namespace gpulab::formats
