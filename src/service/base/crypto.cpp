// OpenSSL-backed hashing and secrets.
#include "service/base/crypto.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/random.h"

namespace gpulab::service {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(new Impl) {
  impl_->ctx = EVP_MD_CTX_new();
  GPULAB_ASSERT(impl_->ctx && EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1,
                "SHA-256 init failed");
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(impl_->ctx);
}

void Sha256::update(const void* data, size_t n) {
  GPULAB_ASSERT(EVP_DigestUpdate(impl_->ctx, data, n) == 1, "SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  GPULAB_ASSERT(EVP_DigestFinal_ex(impl_->ctx, md, &len) == 1, "SHA-256 final failed");
  static const char* const kHex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += kHex[md[i] >> 4];
    s += kHex[md[i] & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

std::string random_secret(size_t n) {
  return random_string(n, kAlnum);
}

Result<std::string> sha256_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Error{Code::kNotFound, "cannot open " + path + ": " + std::strerror(errno)};
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) sha.update(buf.data(), n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Error{Code::kDataError, "cannot read " + path};
  return sha.hex();
}

}  // namespace gpulab::service
