// Streaming detokenization (see incremental_decoder.h).
#include "train/data/incremental_decoder.h"

#include <algorithm>

namespace gpulab::train {

namespace {

// U+FFFD, what SentencePiece's byte fallback decodes an incomplete character's bytes to.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// How much of `s` can be printed now: all but a trailing incomplete UTF-8 sequence, or a
// trailing U+FFFD that the next byte token may still complete.
size_t ready_length(std::string_view s) {
  while (s.size() >= kReplacement.size() && s.ends_with(kReplacement))
    s.remove_suffix(kReplacement.size());
  size_t lead = s.size();
  for (int back = 0; back < 4 && lead > 0; ++back) {
    const auto c = static_cast<unsigned char>(s[lead - 1]);
    --lead;
    if ((c & 0xC0) != 0x80) {  // the last character's first byte
      const size_t need = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      return s.size() - lead >= need ? s.size() : lead;
    }
  }
  return s.size();
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, std::vector<int32_t> prompt,
                                       std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), ids_(std::move(prompt)), stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
  prompt_text_ = new_text();
}

std::string IncrementalDecoder::new_text() const {
  // Ids are checked on the way in, so decoding cannot fail.
  const std::string full = tokenizer_.decode(ids_).value_or(std::string());
  if (full.starts_with(prompt_text_)) return full.substr(prompt_text_.size());
  return full.substr(std::min(prompt_text_.size(), full.size()));
}

std::string IncrementalDecoder::push(int32_t id) {
  // EOS and ids past the tokenizer's vocabulary (a model's padded rows) have no text.
  if (stopped_ || id == tokenizer_.eos_id() || id < 0 || id >= tokenizer_.vocab_size()) return {};
  ids_.push_back(id);
  const std::string all = new_text();
  size_t end = std::string::npos;
  for (const auto& stop : stops_)
    if (const size_t at = all.find(stop); at != std::string::npos)
      end = std::min(end, at + stop.size());
  if (end != std::string::npos)
    stopped_ = true;
  else
    end = ready_length(all);
  if (end <= text_.size()) return {};
  std::string out = all.substr(text_.size(), end - text_.size());
  text_ += out;
  return out;
}

std::string IncrementalDecoder::finish() {
  if (stopped_) return {};
  const std::string all = new_text();
  if (all.size() <= text_.size()) return {};
  std::string out = all.substr(text_.size());
  text_ += out;
  return out;
}

}  // namespace gpulab::train
