// The pre-tokenizer of a byte-level tokenizer.json: expression splits (`Split`, Isolated or
// Removed) and the `ByteLevel` step (GPT-2's own expression when use_regex, a leading space when
// add_prefix_space), cutting normalized text into the pieces BPE merges within.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/result.h"
#include "train/data/hf_regex.h"

namespace gpulab::train::hf {

// GPT-2's expression, which ByteLevel applies when its use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // From tokenizer.json's "pre_tokenizer" object: ByteLevel, or a Sequence of Splits ending in
  // ByteLevel. Anything else is kUnsupported, naming what it is.
  static Result<PreTokenizer> from_json(const Json& j);
  // Appends the pieces of text; a piece with an added prefix space views a string in storage.
  void pieces(std::string_view text, std::deque<std::string>& storage,
              std::vector<std::string_view>& out) const;
  // What the steps are, for messages ("Split(...) + ByteLevel").
  const std::string& describe() const { return description_; }

 private:
  struct Step {
    Regex regex;
    bool has_regex = false;
    bool keep_matches = true;  // Isolated keeps them; Removed drops them
    bool prefix_space = false;
  };
  static Result<Step> split_step(const Json& j);
  static Result<Step> byte_level_step(const Json& j, bool last);

  std::vector<Step> steps_;
  std::string description_;
};

}  // namespace gpulab::train::hf
