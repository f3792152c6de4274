// UTF-8 code points one at a time: the checked decoder behind every text gpulab reads as UTF-8
// (tokenizer input, tokenizer.json files) and the encoder that writes one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpulab {

// The code point at s[i], advancing i; none for ill-formed UTF-8 there (RFC 3629: truncated,
// overlong, a surrogate, past U+10FFFF), leaving i as it was.
std::optional<char32_t> decode_utf8(std::string_view s, size_t& i);

// UTF-8 of one code point.
void append_utf8(std::string& out, char32_t c);

}  // namespace gpulab
