// Row kernels of the fused CPU attention (see attention_rows.h): each has a scalar form and, on
// x86-64 CPUs with AVX2 and FMA, an eight-lane form computing the same expressions.
#include "train/ops/attention_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "train/ops/avx2_lanes.h"

namespace gpulab::train {
namespace {

void softmax_row_scalar(float* p, int64_t n, float scale) {
  float top = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) top = std::max(top, p[j] * scale);
  float total = 0.0f;
  for (int64_t j = 0; j < n; ++j) total += (p[j] = std::exp(p[j] * scale - top));
  const float inv = 1.0f / total;
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
}

void softmax_backward_row_scalar(const float* p, float* dp, int64_t n, float scale) {
  float dot = 0.0f;
  for (int64_t j = 0; j < n; ++j) dot += dp[j] * p[j];
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - dot) * scale;
}

// Elements [from, half) of one row's rotation and of its transpose, in Wide<T>.
template <typename In>
void rotate_scalar(const In* x, const float* c, const float* s, int64_t from, int64_t half,
                   Wide<In>* o) {
  using W = Wide<In>;
  for (int64_t i = from; i < half; ++i) {
    const W a = static_cast<W>(x[i]), b = static_cast<W>(x[i + half]);
    o[i] = a * W(c[i]) - b * W(s[i]);
    o[i + half] = b * W(c[i + half]) + a * W(s[i + half]);
  }
}

template <typename Out>
void rotate_back_scalar(const Wide<Out>* g, const float* c, const float* s, int64_t from,
                        int64_t half, Out* o) {
  using W = Wide<Out>;
  for (int64_t i = from; i < half; ++i) {
    o[i] = static_cast<Out>(g[i] * W(c[i]) + g[i + half] * W(s[i + half]));
    o[i + half] = static_cast<Out>(g[i + half] * W(c[i + half]) - g[i] * W(s[i]));
  }
}

#if defined(GPULAB_AVX2_LANES)
__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* p, int64_t n, float scale) {
  const int64_t n8 = n / 8 * 8;
  const __m256 vs = _mm256_set1_ps(scale);
  float top = -std::numeric_limits<float>::infinity();
  __m256 vtop = _mm256_set1_ps(top);
  for (int64_t j = 0; j < n8; j += 8)
    vtop = _mm256_max_ps(vtop, _mm256_mul_ps(_mm256_loadu_ps(p + j), vs));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vtop);
  for (float l : lanes) top = std::max(top, l);
  for (int64_t j = n8; j < n; ++j) top = std::max(top, p[j] * scale);
  const __m256 shift = _mm256_set1_ps(top);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < n8; j += 8) {
    const __m256 e = exp8(_mm256_fmsub_ps(_mm256_loadu_ps(p + j), vs, shift));
    _mm256_storeu_ps(p + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float total = sum8(acc);
  for (int64_t j = n8; j < n; ++j) total += (p[j] = std::exp(p[j] * scale - top));
  const float inv = 1.0f / total;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (int64_t j = 0; j < n8; j += 8)
    _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), vinv));
  for (int64_t j = n8; j < n; ++j) p[j] *= inv;
}

__attribute__((target("avx2,fma"))) void softmax_backward_row_avx2(const float* p, float* dp,
                                                                   int64_t n, float scale) {
  const int64_t n8 = n / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < n8; j += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(dp + j), _mm256_loadu_ps(p + j), acc);
  float dot = sum8(acc);
  for (int64_t j = n8; j < n; ++j) dot += dp[j] * p[j];
  const __m256 vdot = _mm256_set1_ps(dot), vs = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < n8; j += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(dp + j), vdot);
    _mm256_storeu_ps(dp + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), d), vs));
  }
  for (int64_t j = n8; j < n; ++j) dp[j] = p[j] * (dp[j] - dot) * scale;
}

// Products and sums without fused multiply-adds: the same rounding as the scalar form.
template <typename In>
__attribute__((target("avx2,fma"))) void rotate_avx2(const In* x, const float* c, const float* s,
                                                     int64_t half, float* o) {
  const int64_t h8 = half / 8 * 8;
  for (int64_t i = 0; i < h8; i += 8) {
    const __m256 a = load8(x + i), b = load8(x + half + i);
    _mm256_storeu_ps(o + i, _mm256_sub_ps(_mm256_mul_ps(a, _mm256_loadu_ps(c + i)),
                                          _mm256_mul_ps(b, _mm256_loadu_ps(s + i))));
    _mm256_storeu_ps(o + half + i, _mm256_add_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c + half + i)),
                                                 _mm256_mul_ps(a, _mm256_loadu_ps(s + half + i))));
  }
  rotate_scalar(x, c, s, h8, half, o);
}

template <typename Out>
__attribute__((target("avx2,fma"))) void rotate_back_avx2(const float* g, const float* c,
                                                          const float* s, int64_t half, Out* o) {
  const int64_t h8 = half / 8 * 8;
  for (int64_t i = 0; i < h8; i += 8) {
    const __m256 a = _mm256_loadu_ps(g + i), b = _mm256_loadu_ps(g + half + i);
    store8(o + i, _mm256_add_ps(_mm256_mul_ps(a, _mm256_loadu_ps(c + i)),
                                _mm256_mul_ps(b, _mm256_loadu_ps(s + half + i))));
    store8(o + half + i, _mm256_sub_ps(_mm256_mul_ps(b, _mm256_loadu_ps(c + half + i)),
                                       _mm256_mul_ps(a, _mm256_loadu_ps(s + i))));
  }
  rotate_back_scalar(g, c, s, h8, half, o);
}

template <typename In>
__attribute__((target("avx2,fma"))) void load_avx2(const In* src, int64_t d, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) _mm256_storeu_ps(dst + i, load8(src + i));
  for (; i < d; ++i) dst[i] = static_cast<float>(src[i]);
}

template <typename Out>
__attribute__((target("avx2,fma"))) void store_avx2(const float* src, int64_t d, Out* dst) {
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) store8(dst + i, _mm256_loadu_ps(src + i));
  for (; i < d; ++i) dst[i] = static_cast<Out>(src[i]);
}
#endif

bool vector_lanes() {
#if defined(GPULAB_AVX2_LANES)
  return has_avx2_fma();
#else
  return false;
#endif
}

// The lanes hold float32: float and bfloat16 elements take them, double does not.
template <typename T>
constexpr bool kLaneType = !std::is_same_v<T, double>;

}  // namespace

void softmax_row(float* p, int64_t n, float scale) {
#if defined(GPULAB_AVX2_LANES)
  if (vector_lanes()) return softmax_row_avx2(p, n, scale);
#endif
  softmax_row_scalar(p, n, scale);
}

void softmax_backward_row(const float* p, float* dp, int64_t n, float scale) {
#if defined(GPULAB_AVX2_LANES)
  if (vector_lanes()) return softmax_backward_row_avx2(p, dp, n, scale);
#endif
  softmax_backward_row_scalar(p, dp, n, scale);
}

template <typename In>
void rotate_rows(const In* x, int64_t ld, const float* cos, const float* sin, int64_t rows,
                 int64_t d, Wide<In>* out) {
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

template <typename Out>
void rotate_rows_back(const Wide<Out>* g, const float* cos, const float* sin, int64_t rows,
                      int64_t d, Out* dx, int64_t ld) {
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

template <typename In>
void load_rows(const In* src, int64_t ld, int64_t rows, int64_t d, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
#if defined(GPULAB_AVX2_LANES)
    if (vector_lanes()) {
      load_avx2(src + r * ld, d, dst + r * d);
      continue;
    }
#endif
    for (int64_t i = 0; i < d; ++i) dst[r * d + i] = static_cast<float>(src[r * ld + i]);
  }
}

template <typename Out>
void store_rows(const float* src, int64_t rows, int64_t d, Out* dst, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
#if defined(GPULAB_AVX2_LANES)
    if (vector_lanes()) {
      store_avx2(src + r * d, d, dst + r * ld);
      continue;
    }
#endif
    for (int64_t i = 0; i < d; ++i) dst[r * ld + i] = static_cast<Out>(src[r * d + i]);
  }
}

template void rotate_rows(const float*, int64_t, const float*, const float*, int64_t, int64_t,
                          float*);
template void rotate_rows(const c10::BFloat16*, int64_t, const float*, const float*, int64_t,
                          int64_t, float*);
template void rotate_rows_back(const float*, const float*, const float*, int64_t, int64_t, float*,
                               int64_t);
template void rotate_rows_back(const float*, const float*, const float*, int64_t, int64_t,
                               c10::BFloat16*, int64_t);
template void rotate_rows(const double*, int64_t, const float*, const float*, int64_t, int64_t,
                          double*);
template void rotate_rows_back(const double*, const float*, const float*, int64_t, int64_t, double*,
                               int64_t);
template void load_rows(const float*, int64_t, int64_t, int64_t, float*);
template void load_rows(const c10::BFloat16*, int64_t, int64_t, int64_t, float*);
template void store_rows(const float*, int64_t, int64_t, float*, int64_t);
template void store_rows(const float*, int64_t, int64_t, c10::BFloat16*, int64_t);

}  // namespace gpulab::train
