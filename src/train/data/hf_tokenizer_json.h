// Reads a Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Llama 3, Qwen2) into its
// parts, and refuses every other kind (WordPiece, Unigram, WordLevel, SentencePiece-style BPE,
// normalizers and pre-tokenizers gpulab does not implement) with what it is and what gpulab reads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/result.h"
#include "train/data/hf_added_tokens.h"
#include "train/data/hf_bpe.h"
#include "train/data/hf_pretokenizer.h"

namespace gpulab::train::hf {

struct TokenizerParts {
  bool nfc = false;  // the normalizer is NFC (Qwen2); else none
  PreTokenizer pre;
  BpeModel bpe;
  std::vector<AddedToken> added;
  // Contents of the beginning/end-of-text tokens, where the files say (tokenizer_config.json's
  // bos_token/eos_token, else the post-processor's leading special token / known names).
  std::string bos, eos;
  bool prepend_bos = false;  // the post-processor's template starts with bos
};

// tokenizer.json's text -> its parts; config is tokenizer_config.json beside it (null if none).
Result<TokenizerParts> parse_tokenizer_json(const Json& tokenizer, const Json& config);

}  // namespace gpulab::train::hf
