// Random strings from getrandom(2), by rejection so every character is equally likely.
#include "core/random.h"

#include <sys/random.h>

#include <cerrno>

#include "core/error.h"

namespace gpulab {

std::string random_string(std::size_t n, std::string_view alphabet) {
  GPULAB_ASSERT(alphabet.size() >= 2 && alphabet.size() <= 256, "alphabet of 2..256 characters");
  // Bytes at or above the largest multiple of the alphabet's size would favour its first letters.
  const unsigned limit = 256 / alphabet.size() * alphabet.size();
  std::string s;
  s.reserve(n);
  unsigned char buf[64];
  while (s.size() < n) {
    const ssize_t got = ::getrandom(buf, sizeof buf, 0);
    if (got < 0) {
      GPULAB_ASSERT(errno == EINTR, "getrandom failed");
      continue;
    }
    for (ssize_t i = 0; i < got && s.size() < n; ++i)
      if (buf[i] < limit) s += alphabet[buf[i] % alphabet.size()];
  }
  return s;
}

}  // namespace gpulab
