// New text of a generation as it grows, for printing token by token: the whole sequence (prompt
// and new tokens) is decoded each time and the new text is what follows the prompt's own
// decoding, so a tokenizer that marks word starts on the next token (SentencePiece's "▁") puts
// the space after the prompt where it belongs. Holds back a character still incomplete, and ends
// at the first stop string (included, as transformers' stop_strings do).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/data/tokenizer.h"

namespace gpulab::train {

class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, std::vector<int32_t> prompt,
                     std::vector<std::string> stop_strings = {});

  // Adds a new token and returns the text that is now ready to print (possibly empty). The
  // tokenizer's EOS adds nothing. After a stop string, nothing more is added.
  std::string push(int32_t id);
  // At the end: whatever was held back (an incomplete character, as the tokenizer decodes it).
  std::string finish();

  bool stopped() const { return stopped_; }
  // All the new text handed out so far.
  const std::string& text() const { return text_; }

 private:
  std::string new_text() const;

  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  std::vector<std::string> stops_;
  std::string prompt_text_, text_;
  bool stopped_ = false;
};

}  // namespace gpulab::train
