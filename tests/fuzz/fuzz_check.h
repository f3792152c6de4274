// What every format fuzz target checks besides the sanitizers: a refusal is one kDataError-like
// line (never empty, never several lines), so the CLI's `error:` line names what is wrong.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace gpulab::fuzz {

inline void check_refusal(const Error& e) {
  if (e.message.empty() || e.message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "fuzz: a refusal without a one-line message: '%s'\n", e.message.c_str());
    std::abort();
  }
}

// Reads every byte of a range the parser vouched for, so ASan sees any that lies outside.
inline unsigned touch(const char* p, size_t n) {
  unsigned sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<unsigned char>(p[i]);
  return sum;
}

}  // namespace gpulab::fuzz
