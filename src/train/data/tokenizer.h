// Tokenizers for language models: raw UTF-8 bytes (vocab 256, needs nothing) and SentencePiece
// (Debian's libsentencepiece; optional at build time, so a GPU host without it still trains in
// bytes mode). Opened from a spec: "bytes" or the path of a SentencePiece .model file.
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
  virtual std::string kind() const = 0;  // "bytes" or "sentencepiece"
  virtual int64_t vocab_size() const = 0;
  // -1 when the tokenizer has no such id.
  virtual int64_t eos_id() const = 0;
  virtual int64_t bos_id() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside the vocabulary are kInvalidArgument.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const = 0;
};

// Whether this build can use SentencePiece (built with it, its module loads, not an ASan build).
bool sentencepiece_available();

// "bytes" -> the byte tokenizer; anything else is a SentencePiece model path. A missing or
// unreadable model is kNotFound / kDataError; a build that cannot use SentencePiece is
// kUnsupported, whatever the path.
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
