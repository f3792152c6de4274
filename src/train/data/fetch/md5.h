// MD5 (RFC 1321), to check downloads against the digests the data-set authors publish.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpulab::train {

class Md5 {
 public:
  Md5();
  void update(const void* data, size_t size);
  std::string hex_digest();  // finishes; lower-case hex

 private:
  void block(const unsigned char* p);
  std::array<uint32_t, 4> h_;
  unsigned char buf_[64];
  uint64_t bytes_ = 0;
};

std::string md5_hex(std::string_view data);
Result<std::string> md5_file(const std::filesystem::path& file);

}  // namespace gpulab::train
