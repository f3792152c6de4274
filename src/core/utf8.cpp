// UTF-8 decoding and encoding (see utf8.h).
#include "core/utf8.h"

namespace gpulab {

std::optional<char32_t> decode_utf8(std::string_view s, size_t& i) {
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const auto c0 = static_cast<unsigned char>(s[i]);
  const int len = c0 < 0x80         ? 1
                  : (c0 >> 5) == 6  ? 2
                  : (c0 >> 4) == 14 ? 3
                  : (c0 >> 3) == 30 ? 4
                                    : 0;
  if (len == 0 || i + len > s.size()) return std::nullopt;
  char32_t c = len == 1 ? c0 : c0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    const auto ck = static_cast<unsigned char>(s[i + k]);
    if ((ck & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (ck & 0x3F);
  }
  if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
  i += len;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace gpulab
