// Llama shapes: the named table, config.json parsing, and parameter / FLOP counts from a shape.
#include "train/models/llama_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace gpulab::train {
namespace {

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
         12.0 * static_cast<double>(num_layers * num_heads * dim_per_head() * seq_len);
}

Status LlamaConfig::validate() const {
  const auto bad = [&](const std::string& what) {
    return Status(Code::kInvalidArgument, "model " + name + ": " + what,
                  "fix the shape (config.json fields or the named shape)");
  };
  if (vocab_size < 1 || hidden_size < 1 || intermediate_size < 1 || num_layers < 1 ||
      num_heads < 1 || num_kv_heads < 1 || max_positions < 1)
    return bad("sizes must be positive");
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
  // Fields a LlamaConfig must state; the others default as in transformers' LlamaConfig.
  static const char* required[] = {
      "hidden_size", "num_hidden_layers",       "num_attention_heads", "intermediate_size",
      "vocab_size",  "max_position_embeddings", "rms_norm_eps"};
  std::string missing;
  for (const char* f : required)
    if (!j.contains(f) || !j[f].is_number())
      missing += (missing.empty() ? "" : ", ") + std::string(f);
  if (!missing.empty())
    return Error{Code::kInvalidArgument, std::string(what) + " lacks numeric field(s): " + missing,
                 "a Llama config.json states hidden_size, num_hidden_layers, num_attention_heads, "
                 "intermediate_size, vocab_size, max_position_embeddings and rms_norm_eps"};
  LlamaConfig c;
  c.name = std::string(what);
  c.hidden_size = j["hidden_size"].get<int64_t>();
  c.num_layers = j["num_hidden_layers"].get<int64_t>();
  c.num_heads = j["num_attention_heads"].get<int64_t>();
  c.intermediate_size = j["intermediate_size"].get<int64_t>();
  c.vocab_size = j["vocab_size"].get<int64_t>();
  c.max_positions = j["max_position_embeddings"].get<int64_t>();
  c.rms_norm_eps = j["rms_norm_eps"].get<double>();
  c.num_kv_heads = j.value("num_key_value_heads", c.num_heads);
  if (j.contains("num_key_value_heads") && j["num_key_value_heads"].is_null())
    c.num_kv_heads = c.num_heads;
  c.rope_theta = j.value("rope_theta", 10000.0);
  c.tie_word_embeddings = j.value("tie_word_embeddings", false);
  if (j.contains("head_dim") && j["head_dim"].is_number())
    c.head_dim = j["head_dim"].get<int64_t>();
  if (c.head_dim == c.hidden_size / std::max<int64_t>(1, c.num_heads)) c.head_dim = 0;
  if (auto st = c.validate(); !st) return st.error();
  return c;
}

Result<LlamaConfig> find_llama_config(std::string_view name_or_path) {
  const std::string key = llama_key(name_or_path);
  for (const auto& c : llama_shapes())
    if (c.name == key) return c;
  const auto path = config_path(name_or_path);
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

}  // namespace gpulab::train
