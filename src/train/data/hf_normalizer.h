// Unicode NFC for tokenizer.json files whose normalizer asks for it (Qwen2's), through ICU. A
// build without ICU (GPULAB_HAVE_ICU unset) reports that it cannot.
#pragma once

#include <string>
#include <string_view>

namespace gpulab::train::hf {

bool nfc_available();

// NFC of the well-formed UTF-8 runs of text; ill-formed bytes pass through unchanged (Hugging
// Face's tokenizers only ever see valid UTF-8, and gpulab keeps decode(encode(x)) == x for any x).
// Returns false (out untouched) when text is already NFC, so callers keep their view of it.
bool to_nfc(std::string_view text, std::string& out);

}  // namespace gpulab::train::hf
