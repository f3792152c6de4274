// CRC-32 (core/crc32.h) against its definition: the catalogue's check value, and a bit-at-a-time
// reference over lengths and alignments around the 8-byte step, whole and in pieces.
#include "core/crc32.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace gpulab {
namespace {

// The polynomial division one bit at a time: the definition the tables must reproduce.
uint32_t crc32_bitwise(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

TEST(Crc32, CatalogueCheckValue) {
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);  // CRC-32/ISO-HDLC "check" (zlib's crc32)
  EXPECT_EQ(crc32(""), 0u);
}

TEST(Crc32, EqualsTheBitwiseDefinitionAtEveryLengthAndAlignment) {
  std::mt19937 gen(42);
  std::string buf(5000, '\0');
  for (auto& ch : buf) ch = static_cast<char>(gen());
  for (size_t len : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 63u, 64u, 65u, 1000u, 4097u})
    for (size_t off = 0; off < 8; ++off) {
      const std::string_view v(buf.data() + off, len);
      const uint32_t want = crc32_bitwise(v);
      EXPECT_EQ(crc32(v), want) << len << " bytes at offset " << off;
      const size_t half = len / 2;  // continued from the first part's CRC
      EXPECT_EQ(crc32(v.substr(half), crc32(v.substr(0, half))), want) << len << " in two";
    }
}

TEST(Crc32, OneFlippedBitChangesIt) {
  std::string data(1 << 16, 'x');
  const uint32_t whole = crc32(data);
  for (size_t at : {size_t{0}, size_t{12345}, data.size() - 1})
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = data;
      bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
      EXPECT_NE(crc32(bad), whole) << "byte " << at << " bit " << bit;
    }
}

}  // namespace
}  // namespace gpulab
