// The added and special tokens of a tokenizer.json (`<|endoftext|>`, `<|im_start|>`, ...): found
// in the text before it is pre-tokenized, leftmost first and the longest of those starting at one
// place (as `tokenizers`' Aho-Corasick matcher does), each encoded as its own id.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpulab::train::hf {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;      // swallows the whitespace before it
  bool rstrip = false;      // swallows the whitespace after it
  bool normalized = false;  // matched in the normalized text (else in the raw text)
};

// A piece of text between added tokens (id -1), or one added token (its id).
struct Segment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokenSplitter {
 public:
  AddedTokenSplitter() = default;
  explicit AddedTokenSplitter(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }
  // The segments of text, in order; plain segments are never empty.
  std::vector<Segment> split(std::string_view text) const;

 private:
  // The longest token matching at text[pos], or -1 (an index into tokens_).
  int longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;                // longest first
  std::array<std::vector<int>, 256> by_first_{};  // indices of tokens_ by their first byte
};

}  // namespace gpulab::train::hf
