// Tokenizers for language models: raw UTF-8 bytes (vocab 256, needs nothing), SentencePiece
// (Debian's libsentencepiece; optional at build time, so a GPU host without it still trains in
// bytes mode) and Hugging Face tokenizer.json byte-level BPE (GPT-2, Llama 3, Qwen2; PCRE2 for
// its expressions). Opened from a spec: "bytes", a SentencePiece .model file, a tokenizer.json or
// a folder holding one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::train {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string kind() const = 0;  // "bytes", "sentencepiece" or "hf-bpe"
  virtual int64_t vocab_size() const = 0;
  // -1 when the tokenizer has no such id.
  virtual int64_t eos_id() const = 0;
  virtual int64_t bos_id() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside the vocabulary are kInvalidArgument.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  // Whether a prompt starts with bos_id(), as the model's own tokenizer puts it there (a
  // tokenizer.json whose post-processor template begins with it: Llama 3).
  virtual bool prepends_bos() const { return false; }
  // The files that define it, the first its model (a token folder keeps copies); none for bytes.
  virtual std::vector<std::filesystem::path> files() const { return {}; }
};

// Whether this build can use SentencePiece (built with it, its module loads, not an ASan build).
bool sentencepiece_available();

// "bytes" -> the byte tokenizer; a path ending in .json, or a folder, -> tokenizer.json (a
// folder's tokenizer.json, and tokenizer_config.json beside it for bos/eos); anything else is a
// SentencePiece model path. A missing or unreadable file is kNotFound / kDataError; a kind of
// tokenizer.json gpulab does not implement, or a build without SentencePiece (for a .model) or
// PCRE2 (for tokenizer.json), is kUnsupported.
Result<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& spec);

struct TokenizerTrainOptions {
  std::vector<std::filesystem::path> inputs{};  // plain text or JSONL (`text` field)
  int64_t vocab_size = 4096;
  std::string model_type = "bpe";   // bpe, unigram, char or word
  std::filesystem::path out_dir{};  // gets tokenizer.model and tokenizer.vocab
  // Lines sampled for training (SentencePiece's input_sentence_size); 0 = all.
  int64_t max_sentences = 2'000'000;
  int threads = 0;  // 0 = hardware threads
  // Share of the corpus's characters that get pieces of their own; the rarest rest are bytes
  // (with byte_fallback) or <unk>.
  double character_coverage = 1.0;
  bool byte_fallback = true;  // unknown characters as their UTF-8 bytes (256 ids), never <unk>
  std::vector<std::string> user_defined_symbols{};  // always one piece each (e.g. "<|im_end|>")
};

// Trains a SentencePiece model (ids: 0 unk, 1 bos, 2 eos; byte fallback on by default, so every
// UTF-8 text encodes) and writes out_dir/tokenizer.model atomically. Returns its path. A
// vocabulary the corpus cannot fill, or one too small for its characters, is kInvalidArgument
// saying which way to move --vocab_size; input that is not UTF-8 text is kDataError.
Result<std::filesystem::path> train_sentencepiece(const TokenizerTrainOptions& opts);

}  // namespace gpulab::train
