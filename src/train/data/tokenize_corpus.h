// `gpulab data tokenize` as a library call: text files in, a token data folder (token_file.h)
// out, with a held-out validation split chosen by block so both splits sample the whole corpus.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "train/data/token_file.h"

namespace gpulab::train {

struct TokenizeOptions {
  std::vector<std::filesystem::path> inputs{};  // plain text, or JSONL with a "text" field
  std::string tokenizer = "bytes";              // "bytes" or a SentencePiece .model path
  std::filesystem::path out_dir{};
  // Every round(1 / val_fraction)-th block goes to val.bin (0: no validation split).
  double val_fraction = 0.05;
  int64_t block_bytes = 4096;  // plain text is split into blocks of whole lines this long
  bool overwrite = false;
};

// Called after each block with the input bytes read so far and the total.
using TokenizeProgress = std::function<void(int64_t done, int64_t total)>;

// Checks the inputs and the tokenizer before writing anything; on any failure the folder is left
// as it was. A SentencePiece model is copied in as tokenizer.model, so the folder stands alone.
Result<TokenMeta> tokenize_corpus(const TokenizeOptions& opts, const TokenizeProgress& progress);

}  // namespace gpulab::train
