// The shape of a decoder-only language model (the fields of a Hugging Face config.json, for each
// family gpulab builds: Llama, Qwen2 and GPT-2), the named shapes `gpulab models` lists, and what
// follows from a shape without building it: parameter count and training FLOPs per token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/result.h"

namespace gpulab::formats {

// How a family's blocks are made, as far as counting and planning need to know.
struct DecoderTraits {
  bool rotary = true;                // rotary positions (Llama); false: a learned position table
  bool gated_mlp = true;             // SwiGLU's three matrices; false: two (GELU)
  bool biases = false;               // every linear layer carries a bias (GPT-2)
  bool qkv_biases = false;           // only the query, key and value projections do (Qwen2)
  bool norm_bias = false;            // LayerNorm (scale and bias); false: RMSNorm (scale only)
  bool grouped_query = true;         // fewer key/value heads than query heads allowed
  std::string_view model_type;       // config.json's "model_type"
  std::string_view architecture;     // config.json's "architectures"
  std::string_view token_embedding;  // the embedding table's tensor name in safetensors files
  std::string_view position_embedding = {};  // the learned position table's (GPT-2); empty: none
};

struct DecoderConfig {
  std::string name;              // "llama-tiny", or the config.json path it came from
  std::string family = "llama";  // a decoder_traits() name: "llama", "qwen2" or "gpt2"
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_layers = 32;
  int64_t num_heads = 32;
  int64_t num_kv_heads = 32;  // < num_heads: grouped-query attention
  int64_t head_dim = 0;       // 0: hidden_size / num_heads
  int64_t max_positions = 2048;
  double rope_theta = 10000;  // rotary families only
  double norm_eps = 1e-5;     // RMSNorm's or LayerNorm's epsilon
  bool tie_word_embeddings = false;
  // Small shapes made for this repository take the vocabulary of the token data they train on;
  // published shapes keep theirs (their checkpoints' embedding tables fix it).
  bool vocab_from_data = false;

  int64_t dim_per_head() const { return head_dim > 0 ? head_dim : hidden_size / num_heads; }
  const DecoderTraits& traits() const;  // of `family` (validate() refuses an unknown one)
  int64_t num_parameters() const;
  // Parameters that take part in matrix products per token: all but the input embeddings (a
  // lookup), the output projection counted even when tied to the embedding.
  int64_t matmul_parameters() const;
  // Per block: the weight matrices' elements, and the vectors' (norms, biases).
  int64_t block_matrix_parameters() const;
  int64_t block_vector_parameters() const;
  // Training FLOPs per token at sequence length seq_len (forward + backward), as PaLM's
  // appendix B and torchtitan count them: 6 * matmul_parameters + 12 * layers * heads * head_dim
  // * seq_len (the attention score and value products, without causal savings).
  double train_flops_per_token(int64_t seq_len) const;
  // Checks the fields' relations (heads divide hidden size, kv heads divide heads, ...).
  Status validate() const;
  Json to_json() const;  // the family's Hugging Face config.json
};

// A family's traits ("llama", "qwen2", "gpt2"); null for a name that is not one.
const DecoderTraits* decoder_traits(std::string_view family);

// The named shapes, in the order `gpulab models` prints them.
const std::vector<DecoderConfig>& decoder_shapes();

// True for a named shape, a config.json path, or a folder holding config.json.
bool is_language_model(std::string_view name);

// A named shape (case-insensitive, '_' = '-'), or a Hugging Face config.json (the file or its
// folder). Missing or malformed fields are one InvalidArgument error naming them all.
Result<DecoderConfig> find_decoder_config(std::string_view name_or_path);
// A config.json's object, read in its model_type's dialect: "gpt2" GPT-2's fields (n_embd,
// n_layer, ...); "llama", "mistral" (or none) Llama's; "qwen2" Llama's names for Qwen2. Any other
// model_type is refused, naming it.
Result<DecoderConfig> decoder_config_from_json(const Json& j, std::string_view what);

}  // namespace gpulab::formats
