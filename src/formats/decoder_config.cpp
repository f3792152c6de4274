// Decoder shapes: the named table, lookup by name or config.json, and
// parameter / FLOP counts from a shape.
#include "formats/decoder_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "core/strings.h"

namespace gpulab::formats {
namespace {

constexpr double kMaxParameters = 1e15;
constexpr double kMaxPositions = 2147483648.0;
constexpr uintmax_t kMaxConfigBytes = 16 << 20;  // real ones are a few KB

// name, vocab, hidden, intermediate, layers, heads, kv heads, positions, tied, from data.
DecoderConfig shape(std::string family, std::string name, int64_t vocab, int64_t hidden,
                    int64_t inter, int64_t layers, int64_t heads, int64_t kv_heads, int64_t max_pos,
                    bool tied, bool vocab_from_data) {
  DecoderConfig c;
  c.family = std::move(family);
  c.name = std::move(name);
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.max_positions = max_pos;
  c.tie_word_embeddings = tied;
  c.vocab_from_data = vocab_from_data;
  return c;
}

DecoderConfig llama(std::string name, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers,
                    int64_t heads, int64_t kv_heads, int64_t max_pos, double theta, bool tied,
                    bool from_data) {
  auto c = shape("llama", std::move(name), vocab, hidden, inter, layers, heads, kv_heads, max_pos,
                 tied, from_data);
  c.rope_theta = theta;
  return c;
}

// Qwen2's fixed parts (q/k/v biases are its traits'): RMSNorm eps 1e-6, as every Qwen2.5
// config.json states.
DecoderConfig qwen2(std::string name, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers,
                    int64_t heads, int64_t kv_heads, int64_t max_pos, bool tied, bool from_data) {
  auto c = shape("qwen2", std::move(name), vocab, hidden, inter, layers, heads, kv_heads, max_pos,
                 tied, from_data);
  c.rope_theta = 1e6;
  c.norm_eps = 1e-6;
  return c;
}

DecoderConfig gpt2(std::string name, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                   int64_t max_pos, bool from_data) {
  return shape("gpt2", std::move(name), vocab, hidden, 4 * hidden, layers, heads, heads, max_pos,
               true, from_data);
}

std::string shape_key(std::string_view name) {
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

// The count in floating point, for any field values (validate() refuses shapes past 10^15
// before the integer counts could overflow).
double approx_parameters(const DecoderConfig& c, const DecoderTraits& t) {
  const auto f = [](int64_t v) { return static_cast<double>(v); };
  const double d = f(c.hidden_size), q = f(c.num_heads) * f(c.dim_per_head()),
               kv = f(c.num_kv_heads) * f(c.dim_per_head()), inter = f(c.intermediate_size);
  const double matrices = 2 * d * q + 2 * d * kv + (t.gated_mlp ? 3 : 2) * d * inter;
  const double vectors = 2 * (t.norm_bias ? 2 : 1) * d +
                         (t.biases || t.qkv_biases ? q + 2 * kv : 0) +
                         (t.biases ? 2 * d + inter : 0);
  const double embeddings = f(c.vocab_size) * d * (c.tie_word_embeddings ? 1 : 2) +
                            (t.rotary ? 0 : f(c.max_positions) * d);
  return embeddings + f(c.num_layers) * (matrices + vectors) + (t.norm_bias ? 2 : 1) * d;
}

}  // namespace

const DecoderTraits& DecoderConfig::traits() const {
  const DecoderTraits* t = decoder_traits(family);
  return t ? *t : *decoder_traits("llama");
}

int64_t DecoderConfig::block_matrix_parameters() const {
  const int64_t d = hidden_size, hd = dim_per_head();
  return d * num_heads * hd * 2 + d * num_kv_heads * hd * 2 +
         (traits().gated_mlp ? 3 : 2) * d * intermediate_size;
}

int64_t DecoderConfig::block_vector_parameters() const {
  const auto& t = traits();
  const int64_t d = hidden_size, hd = dim_per_head();
  return 2 * (t.norm_bias ? 2 : 1) * d +
         (t.biases || t.qkv_biases ? (num_heads + 2 * num_kv_heads) * hd : 0) +
         (t.biases ? 2 * d + intermediate_size : 0);
}

int64_t DecoderConfig::num_parameters() const {
  const auto& t = traits();
  const int64_t d = hidden_size;
  const int64_t embeddings =
      vocab_size * d * (tie_word_embeddings ? 1 : 2) + (t.rotary ? 0 : max_positions * d);
  return embeddings + num_layers * (block_matrix_parameters() + block_vector_parameters()) +
         (t.norm_bias ? 2 : 1) * d;
}

int64_t DecoderConfig::matmul_parameters() const {
  return num_layers * block_matrix_parameters() + vocab_size * hidden_size;
}

double DecoderConfig::train_flops_per_token(int64_t seq_len) const {
  return 6.0 * static_cast<double>(matmul_parameters()) +
         12.0 * static_cast<double>(num_layers) * static_cast<double>(num_heads) *
             static_cast<double>(dim_per_head()) * static_cast<double>(seq_len);
}

Status DecoderConfig::validate() const {
  const auto bad = [&](const std::string& what) {
    return Status(Code::kInvalidArgument, "model " + name + ": " + what,
                  "fix the shape (config.json fields or the named shape)");
  };
  const DecoderTraits* t = decoder_traits(family);
  if (t == nullptr)
    return bad("unknown model family '" + printable(family) + "' (llama, qwen2 or gpt2)");
  if (vocab_size < 1 || hidden_size < 1 || intermediate_size < 1 || num_layers < 1 ||
      num_heads < 1 || num_kv_heads < 1 || max_positions < 1 || head_dim < 0)
    return bad("sizes must be positive");
  if (approx_parameters(*this, *t) > kMaxParameters ||
      static_cast<double>(max_positions) > kMaxPositions)
    return bad("the shape is implausibly large (over 10^15 parameters or 2^31 positions)");
  if (head_dim <= 0 && hidden_size % num_heads != 0)
    return bad("hidden_size " + std::to_string(hidden_size) + " is not a multiple of " +
               std::to_string(num_heads) + " heads");
  if (num_heads % num_kv_heads != 0)
    return bad("num_attention_heads " + std::to_string(num_heads) +
               " is not a multiple of num_key_value_heads " + std::to_string(num_kv_heads));
  if (!t->grouped_query && num_kv_heads != num_heads)
    return bad(family + " has no grouped-query attention: key/value heads must equal heads");
  if (t->rotary && dim_per_head() % 2 != 0)
    return bad("rotary embeddings need an even head dimension");
  if (t->rotary && !(rope_theta > 0)) return bad("rope_theta must be > 0");
  if (!(norm_eps > 0)) return bad("the norm's epsilon must be > 0");
  return ok_status();
}

const std::vector<DecoderConfig>& decoder_shapes() {
  // Published sizes: Llama 3 8B / 70B (Meta's config.json), Mistral 7B v0.1, Llama 3.2 1B,
  // GPT-2 small and medium (OpenAI's, as transformers' gpt2 / gpt2-medium), Qwen2.5 0.5B, 1.5B
  // and 7B (the Instruct models' config.json: 32,768 positions; 0.5B and 1.5B tied). llama-tiny,
  // llama-125m (GPT-3 small's width and depth, with GQA), gpt2-tiny and qwen2-tiny are ours.
  static const std::vector<DecoderConfig> table = {
      llama("llama-tiny", 4096, 256, 688, 4, 8, 8, 1024, 10000, false, true),
      llama("llama-125m", 32000, 768, 2048, 12, 12, 4, 2048, 10000, false, true),
      llama("llama-1b", 128256, 2048, 8192, 16, 32, 8, 131072, 500000, true, false),
      llama("llama3-8b", 128256, 4096, 14336, 32, 32, 8, 8192, 500000, false, false),
      llama("llama3-70b", 128256, 8192, 28672, 80, 64, 8, 8192, 500000, false, false),
      llama("mistral-7b", 32000, 4096, 14336, 32, 32, 8, 32768, 10000, false, false),
      gpt2("gpt2-tiny", 4096, 256, 4, 8, 1024, true),
      gpt2("gpt2-124m", 50257, 768, 12, 12, 1024, false),
      gpt2("gpt2-355m", 50257, 1024, 24, 16, 1024, false),
      qwen2("qwen2-tiny", 4096, 256, 688, 4, 8, 2, 1024, true, true),
      qwen2("qwen2.5-0.5b", 151936, 896, 4864, 24, 14, 2, 32768, true, false),
      qwen2("qwen2.5-1.5b", 151936, 1536, 8960, 28, 12, 2, 32768, true, false),
      qwen2("qwen2.5-7b", 152064, 3584, 18944, 28, 28, 4, 32768, false, false),
  };
  return table;
}

bool is_language_model(std::string_view name) {
  const std::string key = shape_key(name);
  for (const auto& c : decoder_shapes())
    if (c.name == key) return true;
  const auto p = config_path(name);
  return p.extension() == ".json";
}

Result<DecoderConfig> find_decoder_config(std::string_view name_or_path) {
  const std::string key = shape_key(name_or_path);
  for (const auto& c : decoder_shapes())
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
    for (const auto& c : decoder_shapes()) names += (names.empty() ? "" : ", ") + c.name;
    return Error{Code::kInvalidArgument, "no language model '" + std::string(name_or_path) + "'",
                 "use one of " + names + ", or a Hugging Face config.json (or its folder)"};
  }
  std::stringstream text;
  text << in.rdbuf();
  auto j = parse_json(text.str(), path.string());
  if (!j) return j.error();
  return decoder_config_from_json(*j, path.string());
}

}  // namespace gpulab::formats
