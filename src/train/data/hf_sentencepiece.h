// The tokenizer.json form of a SentencePiece model (what `gpulab export` writes beside
// tokenizer.model), so that transformers' AutoTokenizer and the tokenizers library read a
// gpulab-trained tokenizer without the sentencepiece and protobuf Python packages, and encode
// every text to the same ids as SentencePiece does.
#pragma once

#include <string_view>

#include "core/json.h"
#include "core/result.h"

namespace gpulab::train::hf {

// tokenizer.model's bytes -> tokenizer.json. BPE and Unigram models whose normalization the JSON
// form reproduces exactly (identity rules, whitespace kept, spaces escaped as U+2581) have one;
// any other gets kUnsupported saying which setting stands in the way.
Result<Json> sentencepiece_tokenizer_json(std::string_view model);

}  // namespace gpulab::train::hf
