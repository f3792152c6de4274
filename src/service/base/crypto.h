// SHA-256 (one-shot and streaming, through OpenSSL EVP) and random secrets for tokens and
// SSH passwords (OpenSSL's CSPRNG).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpulab::service {

std::string sha256_hex(std::string_view data);
// SHA-256 of a whole file (what `sha256sum FILE` prints), read in 1 MiB pieces.
Result<std::string> sha256_file(const std::string& path);

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // finishes; call once

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// n random characters from [A-Za-z0-9] (62 symbols; 32 chars ~ 190 bits).
std::string random_secret(size_t n);

}  // namespace gpulab::service
