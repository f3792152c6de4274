// Added and special tokens split out of the text (see hf_added_tokens.h).
#include "train/data/hf_added_tokens.h"

#include <algorithm>

#include "core/utf8.h"
#include "train/data/hf_byte_map.h"

namespace gpulab::train::hf {
namespace {

// Unicode White_Space, as Rust's char::is_whitespace that `tokenizers` strips with.
bool is_space(char32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The start of the whitespace run that ends at `end` (not before `floor`).
size_t strip_left(std::string_view text, size_t end, size_t floor) {
  size_t at = end;
  while (at > floor) {
    size_t b = at - 1;  // back to the first byte of the previous character
    while (b > floor && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
    size_t i = b;
    const auto c = decode_utf8(text, i);
    if (!c || i != at || !is_space(*c)) break;
    at = b;
  }
  return at;
}

// The end of the whitespace run that starts at `begin`.
size_t strip_right(std::string_view text, size_t begin) {
  size_t at = begin;
  while (at < text.size()) {
    size_t i = at;
    const auto c = decode_utf8(text, i);
    if (!c || !is_space(*c)) break;
    at = i;
  }
  return at;
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens) {
  for (auto& t : tokens)
    if (!t.content.empty()) tokens_.push_back(std::move(t));
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (size_t i = 0; i < tokens_.size(); ++i)
    by_first_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(static_cast<int>(i));
}

int AddedTokenSplitter::longest_at(std::string_view text, size_t pos) const {
  for (int k : by_first_[static_cast<unsigned char>(text[pos])]) {
    const std::string& c = tokens_[static_cast<size_t>(k)].content;
    if (text.compare(pos, c.size(), c) == 0) return k;
  }
  return -1;
}

std::vector<Segment> AddedTokenSplitter::split(std::string_view text) const {
  std::vector<Segment> out;
  size_t plain = 0;  // where the current plain segment began
  for (size_t pos = 0; pos < text.size();) {
    const int k =
        by_first_[static_cast<unsigned char>(text[pos])].empty() ? -1 : longest_at(text, pos);
    if (k < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(k)];
    const size_t begin = t.lstrip ? strip_left(text, pos, plain) : pos;
    const size_t end =
        t.rstrip ? strip_right(text, pos + t.content.size()) : pos + t.content.size();
    if (begin > plain) out.push_back(Segment{text.substr(plain, begin - plain), -1});
    out.push_back(Segment{text.substr(begin, end - begin), t.id});
    plain = pos = end;
  }
  if (plain < text.size()) out.push_back(Segment{text.substr(plain), -1});
  return out;
}

}  // namespace gpulab::train::hf
