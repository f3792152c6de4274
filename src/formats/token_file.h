// Token data for language models: a folder holding train.bin and val.bin (flat little-endian
// uint16 or uint32 token ids, no header, so numpy.memmap reads them too) and meta.json saying
// what they hold (vocabulary, dtype, token and UTF-8 byte counts, tokenizer, checksums).
// The .bin files are memory-mapped; nothing is read into memory until a window is taken.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::formats {

enum class TokenDtype { kUint16, kUint32 };

// uint16 when every id fits (vocab <= 65536), else uint32.
TokenDtype token_dtype_for_vocab(int64_t vocab_size);
int64_t token_width(TokenDtype dtype);  // bytes per token: 2 or 4
const char* token_dtype_name(TokenDtype dtype);

// What one split file holds.
struct TokenSplitMeta {
  int64_t tokens = 0;
  int64_t text_bytes = 0;  // UTF-8 bytes of the text these tokens encode (for bits per byte)
  uint64_t checksum = 0;   // FNV-1a 64 of the file's bytes
};

// meta.json of a token data folder.
struct TokenMeta {
  int format_version = 1;
  int64_t vocab_size = 0;
  TokenDtype dtype = TokenDtype::kUint16;
  std::string tokenizer = "bytes";  // "bytes" or "sentencepiece"
  std::string tokenizer_model{};    // file in the folder (sentencepiece: "tokenizer.model")
  int64_t eos_id = -1;              // id put between documents, -1 when none
  TokenSplitMeta train{}, val{};
  std::vector<std::string> sources{};  // the input files, for the record

  // UTF-8 bytes per token of the training split: loss_nats / ln(2) / bytes_per_token is bits
  // per byte. 1.0 in bytes mode.
  double bytes_per_token() const;
  // Same, for the validation split (falls back to train's when val is empty).
  double val_bytes_per_token() const;
};

// One memory-mapped .bin file.
class TokenFile {
 public:
  // Maps `path` holding `tokens` ids of `dtype`. A size that disagrees is kDataError.
  static Result<TokenFile> open(const std::filesystem::path& path, TokenDtype dtype,
                                int64_t tokens);
  TokenFile() = default;
  TokenFile(TokenFile&&) noexcept;
  TokenFile& operator=(TokenFile&&) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  int64_t size() const { return tokens_; }
  TokenDtype dtype() const { return dtype_; }
  int64_t at(int64_t i) const;
  // Copies tokens [offset, offset + count) as int64 into out.
  void read(int64_t offset, int64_t count, int64_t* out) const;
  // FNV-1a 64 of the raw bytes, and the largest id (one pass).
  std::pair<uint64_t, int64_t> scan() const;

 private:
  const unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
  int64_t tokens_ = 0;
  TokenDtype dtype_ = TokenDtype::kUint16;
};

struct TokenDataOptions {
  // Reads both files once to check checksums and that every id < vocab_size (a truncated or
  // corrupt file then fails at open, not mid-run). Costs one pass at memory speed.
  bool verify = true;
};

// A token data folder: meta.json + train.bin + val.bin.
class TokenData {
 public:
  // Every failure (missing folder or file, bad meta.json, size or checksum mismatch) is a
  // kNotFound / kDataError with a hint; nothing is written.
  static Result<TokenData> open(const std::filesystem::path& dir, TokenDataOptions opts = {});

  const TokenMeta& meta() const { return meta_; }
  const TokenFile& train() const { return *train_; }
  const TokenFile& val() const { return *val_; }
  const std::filesystem::path& dir() const { return dir_; }
  // The tokenizer spec to open (tokenizer.h): "bytes" or the model file's full path.
  std::string tokenizer_spec() const;

  // The model's vocabulary must hold every id of the data: data vocab > model vocab is
  // kInvalidArgument ("the data was tokenized with N ids, the model has M").
  Status check_vocab(int64_t model_vocab) const;
  // Both splits must hold at least one window of seq_len + 1 tokens (val may be empty only
  // when allow_empty_val).
  Status check_seq_len(int64_t seq_len, bool allow_empty_val = false) const;

 private:
  std::filesystem::path dir_;
  TokenMeta meta_;
  std::unique_ptr<TokenFile> train_, val_;
};

// Writes a token data folder: tokens are appended per split, finish() writes meta.json last
// (atomically), so a folder without meta.json is never mistaken for a complete one.
class TokenWriter {
 public:
  // Creates `dir` (must not hold a meta.json unless overwrite) and opens both .bin files.
  static Result<std::unique_ptr<TokenWriter>> create(const std::filesystem::path& dir,
                                                     TokenMeta meta, bool overwrite = false);
  ~TokenWriter();
  enum class Split { kTrain, kVal };
  // Appends ids (each must be < vocab_size) that encode `text_bytes` bytes of text.
  Status append(Split split, const std::vector<int32_t>& ids, int64_t text_bytes);
  // Flushes, fsyncs and writes meta.json; returns the final meta.
  Result<TokenMeta> finish();
  const TokenMeta& meta() const { return meta_; }

 private:
  TokenWriter() = default;
  struct Out;
  std::filesystem::path dir_;
  TokenMeta meta_;
  std::unique_ptr<Out> train_, val_;
  bool finished_ = false, created_dir_ = false;
};

// meta.json <-> TokenMeta (exposed for tests and `gpulab data info`).
std::string token_meta_to_json(const TokenMeta& meta);
Result<TokenMeta> token_meta_from_json(const std::string& text);

}  // namespace gpulab::formats
