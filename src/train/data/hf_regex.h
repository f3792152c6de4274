// A compiled PCRE2 expression for tokenizer.json's pre-tokenizers (Unicode classes, lookahead:
// what std::regex lacks), in UTF mode with Unicode properties, JIT-compiled where PCRE2 can.
// A build without PCRE2 (GPULAB_HAVE_PCRE2 unset) refuses to compile any expression.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpulab::train::hf {

class Regex {
 public:
  // kInvalidArgument for an expression PCRE2 refuses (with its message and offset, the
  // expression called `what` there); kUnsupported in a build without PCRE2.
  static Result<Regex> compile(const std::string& pattern,
                               std::string_view what = "the pre-tokenizer expression");
  // The [begin, end) byte ranges of the non-overlapping matches in text, left to right. Ill-formed
  // UTF-8 never matches (PCRE2_MATCH_INVALID_UTF), so it falls in the gaps. A match PCRE2 cannot
  // finish within its limits throws (kResourceExhausted): never a silently different split.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // Whether it matches anywhere in text (an empty match counts: "^$" matches ""). A match PCRE2
  // cannot finish within its limits is kResourceExhausted.
  Result<bool> search(std::string_view text) const;
  bool jit() const { return jit_; }

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8, freed by its deleter
  bool jit_ = false;
};

}  // namespace gpulab::train::hf
