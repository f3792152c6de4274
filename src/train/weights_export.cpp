// Final-weights export in safetensors format (through train/weights/safetensors.h), and the
// Hugging Face folder of a language model (weights, config.json, tokenizer files).
#include "train/weights_export.h"

#include <memory>

#include "core/error.h"
#include "core/files.h"
#include "train/data/hf_byte_map.h"
#include "train/data/hf_sentencepiece.h"
#include "train/data/tokenizer.h"
#include "train/weights/hf_shards.h"

namespace gpulab::train {
namespace {

// gpulab's byte tokenizer (id = byte value) as tokenizers' byte-level BPE with no merges.
Json byte_tokenizer_json() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::spell_bytes(std::string(1, static_cast<char>(b)))] = b;
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", Json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", Json::array()}}}};
}

void write_or_throw(const std::filesystem::path& file, const std::string& text) {
  if (auto st = write_file_atomic(file, text); !st) throw Exception(st.error());
}

// A file into dir under `name` (not written again when it is there already); returns its bytes.
std::string copy_into(const std::filesystem::path& dir, const std::filesystem::path& file,
                      const std::string& name) {
  auto bytes = read_file(file);
  if (!bytes) throw Exception(bytes.error());
  if (std::filesystem::path(file) != dir / name) write_or_throw(dir / name, *bytes);
  return std::move(*bytes);
}

// The tokenizer's files; returns its (bos, eos) ids, null where it has none or is unknown.
std::pair<Json, Json> write_tokenizer_files(const std::filesystem::path& dir,
                                            const DecoderConfig& c, const std::string& spec) {
  if (spec.empty()) return {nullptr, nullptr};
  auto tok = open_tokenizer(spec);
  const auto id = [&](int64_t v) { return v >= 0 ? Json(v) : Json(nullptr); };
  const Json bos = tok ? id((*tok)->bos_id()) : Json(nullptr);
  const Json eos = tok ? id((*tok)->eos_id()) : Json(nullptr);
  Json config = {{"model_max_length", c.max_positions}};
  if (spec == "bytes") {
    write_or_throw(dir / "tokenizer.json", byte_tokenizer_json().dump() + "\n");
    config["tokenizer_class"] = "PreTrainedTokenizerFast";
    config["gpulab_tokenizer"] = "bytes";  // how `gpulab generate` knows it again
  } else if (tok && (*tok)->kind() == "hf-bpe") {
    // A Hugging Face tokenizer.json (and its tokenizer_config.json) as they are: transformers
    // reads them, and `gpulab generate` finds tokenizer.json in the run folder.
    for (const auto& f : (*tok)->files()) copy_into(dir, f, f.filename().string());
    if (std::filesystem::exists(dir / "tokenizer_config.json")) return {bos, eos};
    config["tokenizer_class"] = "PreTrainedTokenizerFast";
  } else {
    // A SentencePiece model (also where this build cannot open it: the file is copied as is).
    const auto files = tok ? (*tok)->files() : std::vector<std::filesystem::path>{};
    const std::string model = copy_into(
        dir, files.empty() ? std::filesystem::path(spec) : files.front(), "tokenizer.model");
    // Its tokenizer.json form, where one encodes as the model does: transformers then reads it
    // as it is (no sentencepiece package, no Llama-specific rewriting of its spaces).
    const auto form = hf::sentencepiece_tokenizer_json(model);
    if (form) write_or_throw(dir / "tokenizer.json", form->dump() + "\n");
    // gpulab's SentencePiece ids: 0 <unk>, 1 <s>, 2 </s>; encode adds neither bos nor eos.
    config.update({{"tokenizer_class", form ? "PreTrainedTokenizerFast" : "LlamaTokenizer"},
                   {"unk_token", "<unk>"},
                   {"bos_token", "<s>"},
                   {"eos_token", "</s>"},
                   {"add_bos_token", false},
                   {"add_eos_token", false}});
  }
  write_or_throw(dir / "tokenizer_config.json", config.dump(2) + "\n");
  return {bos, eos};
}

std::string hf_dtype_name(const StateDict& tensors) {
  for (const auto& [name, t] : tensors) {
    if (!t.is_floating_point()) continue;
    if (t.scalar_type() == torch::kBFloat16) return "bfloat16";
    if (t.scalar_type() == torch::kHalf) return "float16";
    if (t.scalar_type() == torch::kDouble) return "float64";
    return "float32";
  }
  return "float32";
}

}  // namespace

std::map<std::string, std::string> safetensors_metadata(const std::string& producer) {
  return {{"format", "pt"}, {"producer", producer}};
}

void export_weights(torch::nn::Module& model, const std::filesystem::path& file) {
  // module_state_dict gives torchvision's names; the writer stores standard (NCHW) layout, so
  // channels_last training changes nothing in the file.
  auto st = write_safetensors(file, module_state_dict(model), safetensors_metadata("gpulab train"));
  if (!st) throw Exception(st.error());
}

std::filesystem::path write_hf_folder(const std::filesystem::path& dir, const DecoderConfig& config,
                                      TensorStream& tensors, const std::string& tokenizer_spec,
                                      const std::string& producer, uint64_t max_shard_bytes) {
  try {
    std::filesystem::create_directories(dir);
    const auto [bos, eos] = write_tokenizer_files(dir, config, tokenizer_spec);
    Json j = config.to_json();
    // Explicit nulls: GPT-2's config otherwise defaults to 50256, outside a small vocabulary.
    j["bos_token_id"] = bos;
    j["eos_token_id"] = eos;
    j["pad_token_id"] = nullptr;
    j["torch_dtype"] = hf_dtype_name(tensors.layout());
    write_or_throw(dir / "config.json", j.dump(2) + "\n");
  } catch (...) {
    drain(tensors);  // the ranks that send the weights finish before the error ends the run
    throw;
  }
  return write_hf_weights(dir, tensors, safetensors_metadata(producer), max_shard_bytes)
      .value_or_throw();
}

std::filesystem::path write_hf_folder(const std::filesystem::path& dir, const DecoderConfig& config,
                                      const StateDict& tensors, const std::string& tokenizer_spec,
                                      const std::string& producer, uint64_t max_shard_bytes) {
  StateDictStream stream(tensors);
  return write_hf_folder(dir, config, stream, tokenizer_spec, producer, max_shard_bytes);
}

}  // namespace gpulab::train
