// Rotary kernels of the fused CPU attention (see attention_rows.h): each has a scalar form and, on
// x86-64 CPUs with AVX2 and FMA, an eight-lane form computing the same expressions.
#include "train/ops/attention_rows.h"

#include <algorithm>
#include <type_traits>

#include "train/ops/avx2_lanes.h"

namespace gpulab::train {
namespace {

// Elements [from, half) of one row's rotation and of its transpose, in Wide<T>.
template <typename In, typename Out>
void rotate_scalar(const In* x, const float* c, const float* s, int64_t from, int64_t half,
                   Out* o) {
  using W = Wide<In>;
  for (int64_t i = from; i < half; ++i) {
    const W a = static_cast<W>(x[i]), b = static_cast<W>(x[i + half]);
    o[i] = static_cast<Out>(a * W(c[i]) - b * W(s[i]));
    o[i + half] = static_cast<Out>(b * W(c[i + half]) + a * W(s[i + half]));
  }
}

template <typename G, typename Out>
void rotate_back_scalar(const G* g, const float* c, const float* s, int64_t from, int64_t half,
                        Out* o) {
  using W = Wide<Out>;
  for (int64_t i = from; i < half; ++i) {
    const W a = static_cast<W>(g[i]), b = static_cast<W>(g[i + half]);
    o[i] = static_cast<Out>(a * W(c[i]) + b * W(s[i + half]));
    o[i + half] = static_cast<Out>(b * W(c[i + half]) - a * W(s[i]));
  }
}

#if defined(GPULAB_AVX2_LANES)
// Products and sums without fused multiply-adds: the same rounding as the scalar form.
template <typename In, typename Out>
__attribute__((target("avx2,fma"))) void rotate_avx2(const In* x, const float* c, const float* s,
                                                     int64_t half, Out* o) {
  const int64_t h8 = half / 8 * 8;
  for (int64_t i = 0; i < h8; i += 8) {
    const __m256 a = load8(x + i), b = load8(x + half + i);
    store8(o + i, _mm256_sub_ps(_mm256_mul_ps(a, _mm256_loadu_ps(c + i)),
                                _mm256_mul_ps(b, _mm256_loadu_ps(s + i))));
    store8(o + half + i, _mm256_add_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c + half + i)),
                                       _mm256_mul_ps(a, _mm256_loadu_ps(s + half + i))));
  }
  rotate_scalar(x, c, s, h8, half, o);
}

template <typename G, typename Out>
__attribute__((target("avx2,fma"))) void rotate_back_avx2(const G* g, const float* c,
                                                          const float* s, int64_t half, Out* o) {
  const int64_t h8 = half / 8 * 8;
  for (int64_t i = 0; i < h8; i += 8) {
    const __m256 a = load8(g + i), b = load8(g + half + i);
    store8(o + i, _mm256_add_ps(_mm256_mul_ps(a, _mm256_loadu_ps(c + i)),
                                _mm256_mul_ps(b, _mm256_loadu_ps(s + half + i))));
    store8(o + half + i, _mm256_sub_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c + half + i)),
                                       _mm256_mul_ps(a, _mm256_loadu_ps(s + i))));
  }
  rotate_back_scalar(g, c, s, h8, half, o);
}

#endif

bool vector_lanes() {
#if defined(GPULAB_AVX2_LANES)
  return has_avx2_fma();
#else
  return false;
#endif
}

// The lanes hold float32: float elements take them, double does not.
template <typename T>
constexpr bool kLaneType = !std::is_same_v<T, double>;

}  // namespace

template <typename In, typename Out>
void rotate_rows(const In* x, int64_t ld, const float* cos, const float* sin, int64_t rows,
                 int64_t d, Out* out) {
  const int64_t half = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
#if defined(GPULAB_AVX2_LANES)
    if constexpr (kLaneType<In>) {
      if (vector_lanes()) {
        rotate_avx2(x + r * ld, cos + r * d, sin + r * d, half, out + r * d);
        continue;
      }
    }
#endif
    rotate_scalar(x + r * ld, cos + r * d, sin + r * d, 0, half, out + r * d);
  }
}

template <typename G, typename Out>
void rotate_rows_back(const G* g, const float* cos, const float* sin, int64_t rows, int64_t d,
                      Out* dx, int64_t ld) {
  const int64_t half = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
#if defined(GPULAB_AVX2_LANES)
    if constexpr (kLaneType<Out>) {
      if (vector_lanes()) {
        rotate_back_avx2(g + r * d, cos + r * d, sin + r * d, half, dx + r * ld);
        continue;
      }
    }
#endif
    rotate_back_scalar(g + r * d, cos + r * d, sin + r * d, 0, half, dx + r * ld);
  }
}

template void rotate_rows(const float*, int64_t, const float*, const float*, int64_t, int64_t,
                          float*);
template void rotate_rows_back(const float*, const float*, const float*, int64_t, int64_t, float*,
                               int64_t);
template void rotate_rows(const double*, int64_t, const float*, const float*, int64_t, int64_t,
                          double*);
template void rotate_rows_back(const double*, const float*, const float*, int64_t, int64_t, double*,
                               int64_t);
template void rotate_rows(const c10::BFloat16*, int64_t, const float*, const float*, int64_t,
                          int64_t, c10::BFloat16*);
template void rotate_rows_back(const c10::BFloat16*, const float*, const float*, int64_t, int64_t,
                               c10::BFloat16*, int64_t);

}  // namespace gpulab::train
