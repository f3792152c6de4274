// CRC-32 by slicing-by-8 (crc32.h): eight table lookups per 8-byte word instead of one per byte,
// so the loop is no longer one serial chain of shifts and lookups.
#include "core/crc32.h"

#include <array>
#include <bit>
#include <cstring>

namespace gpulab {

namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the byte-wise table; tables[k][b] is the CRC of byte b followed by k zero bytes.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32(std::string_view bytes, uint32_t crc) {
  static_assert(std::endian::native == std::endian::little, "the 8-byte step reads little-endian");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);  // memcpy: any alignment
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
        kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

}  // namespace gpulab
