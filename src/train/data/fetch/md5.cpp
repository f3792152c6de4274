// MD5 per RFC 1321: 64-byte blocks, four rounds of sixteen steps.
#include "train/data/fetch/md5.h"

#include <cstring>
#include <fstream>

namespace gpulab::train {

namespace {

constexpr uint32_t kShift[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

// K[i] = floor(abs(sin(i + 1)) * 2^32).
constexpr uint32_t kSine[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

uint32_t rotl(uint32_t x, uint32_t c) {
  return (x << c) | (x >> (32 - c));
}

}  // namespace

Md5::Md5() : h_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476} {}

void Md5::block(const unsigned char* p) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i)
    m[i] = uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 |
           uint32_t{p[4 * i + 3]} << 24;
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3];
  for (uint32_t i = 0; i < 64; ++i) {
    uint32_t f = 0, g = 0;
    if (i < 16)
      f = (b & c) | (~b & d), g = i;
    else if (i < 32)
      f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
    else if (i < 48)
      f = b ^ c ^ d, g = (3 * i + 5) % 16;
    else
      f = c ^ (b | ~d), g = (7 * i) % 16;
    const uint32_t tmp = d;
    d = c;
    c = b;
    b = b + rotl(a + f + kSine[i] + m[g], kShift[i]);
    a = tmp;
  }
  h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d;
}

void Md5::update(const void* data, size_t size) {
  auto* p = static_cast<const unsigned char*>(data);
  size_t fill = bytes_ % 64;
  bytes_ += size;
  if (fill) {
    const size_t n = std::min(size, 64 - fill);
    std::memcpy(buf_ + fill, p, n);
    p += n, size -= n, fill += n;
    if (fill < 64) return;
    block(buf_);
  }
  for (; size >= 64; p += 64, size -= 64) block(p);
  std::memcpy(buf_, p, size);
}

std::string Md5::hex_digest() {
  const uint64_t bits = bytes_ * 8;
  const unsigned char one = 0x80, zero = 0;
  update(&one, 1);
  while (bytes_ % 64 != 56) update(&zero, 1);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (8 * i));
  update(len, 8);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h_)
    for (int i = 0; i < 4; ++i) {
      const auto byte = static_cast<unsigned char>(v >> (8 * i));
      out += hex[byte >> 4];
      out += hex[byte & 15];
    }
  return out;
}

std::string md5_hex(std::string_view data) {
  Md5 m;
  m.update(data.data(), data.size());
  return m.hex_digest();
}

Result<std::string> md5_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Result<std::string>(Code::kNotFound, "cannot open " + file.string());
  Md5 m;
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    m.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return Result<std::string>(Code::kDataError, "cannot read " + file.string());
  return m.hex_digest();
}

}  // namespace gpulab::train
