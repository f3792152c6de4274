// GPT-2's byte-to-unicode table (see hf_byte_map.h).
#include "train/data/hf_byte_map.h"

#include "core/utf8.h"

namespace gpulab::train::hf {
namespace {

bool prints_as_itself(uint8_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

struct ByteTable {
  std::array<char32_t, 256> to_char{};
  ByteTable() {
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b)
      to_char[b] = prints_as_itself(static_cast<uint8_t>(b)) ? static_cast<char32_t>(b) : next++;
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return table().to_char[b];
}

std::optional<uint8_t> char_to_byte(char32_t c) {
  if (c < 0x100 && prints_as_itself(static_cast<uint8_t>(c))) return static_cast<uint8_t>(c);
  if (c < 0x100 || c >= 0x100 + 68) return std::nullopt;
  // The n-th non-printing byte in byte order.
  int n = static_cast<int>(c - 0x100);
  for (int b = 0; b < 256; ++b)
    if (!prints_as_itself(static_cast<uint8_t>(b)) && n-- == 0) return static_cast<uint8_t>(b);
  return std::nullopt;
}

std::string spell_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(b)));
  return out;
}

std::optional<std::string> unspell(std::string_view spelled) {
  std::string out;
  out.reserve(spelled.size());
  for (size_t i = 0; i < spelled.size();) {
    const auto c = decode_utf8(spelled, i);
    if (!c) return std::nullopt;
    const auto b = char_to_byte(*c);
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
  }
  return out;
}

}  // namespace gpulab::train::hf
