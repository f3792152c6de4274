// The shape of a Llama-style decoder (the fields of a Hugging Face LlamaConfig), the named shapes
// `gpulab models` lists, and what follows from a shape without building it: parameter count and
// training FLOPs per token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/result.h"

namespace gpulab::formats {

struct LlamaConfig {
  std::string name;  // "llama-tiny", or the config.json path it came from
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_layers = 32;
  int64_t num_heads = 32;
  int64_t num_kv_heads = 32;  // < num_heads: grouped-query attention
  int64_t head_dim = 0;       // 0: hidden_size / num_heads
  int64_t max_positions = 2048;
  double rope_theta = 10000;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  // Small shapes made for this repository take the vocabulary of the token data they train on;
  // published shapes keep theirs (their checkpoints' embedding tables fix it).
  bool vocab_from_data = false;

  int64_t dim_per_head() const { return head_dim > 0 ? head_dim : hidden_size / num_heads; }
  int64_t num_parameters() const;
  // Parameters that take part in matrix products per token: all but the input embedding (a
  // lookup), the output projection counted even when tied to the embedding.
  int64_t matmul_parameters() const;
  // Training FLOPs per token at sequence length seq_len (forward + backward), as PaLM's
  // appendix B and torchtitan count them: 6 * matmul_parameters + 12 * layers * heads * head_dim
  // * seq_len (the attention score and value products, without causal savings).
  double train_flops_per_token(int64_t seq_len) const;
  // Checks the fields' relations (heads divide hidden size, kv heads divide heads, ...).
  Status validate() const;
  Json to_json() const;
};

// The named shapes, in the order `gpulab models` prints them.
const std::vector<LlamaConfig>& llama_shapes();

// True for a named shape, a config.json path, or a folder holding config.json.
bool is_language_model(std::string_view name);

// A named shape (case-insensitive, '_' = '-'), or a Hugging Face config.json (the file or its
// folder). Missing or malformed fields are one InvalidArgument error naming them all.
Result<LlamaConfig> find_llama_config(std::string_view name_or_path);
Result<LlamaConfig> llama_config_from_json(const Json& j, std::string_view what);

}  // namespace gpulab::formats
