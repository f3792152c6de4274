// Whole-number division rounded up, and rounding up to a multiple: one home for the sizes of
// blocks, shards and panels (memory plans, collective segments, kernels' packed panels).
#pragma once

#include <cstdint>

namespace gpulab {

// a / b rounded up, for a >= 0 and b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The least multiple of `to` that is at least v, for v >= 0 and to > 0.
constexpr int64_t round_up(int64_t v, int64_t to) {
  return ceil_div(v, to) * to;
}

}  // namespace gpulab
