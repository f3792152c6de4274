// Eight float32 lanes in AVX2 for gpulab's CPU kernels (SwiGLU, RMSNorm, attention rows): loads and
// stores of float32 and bfloat16 memory, exp, and the float32 / bfloat16 dispatch they share; the
// CPU feature checks (AVX2 + FMA, and the AVX-512 subsets libtorch's oneDNN kernels want).
// GPULAB_AVX2_LANES is defined where the helpers exist (x86-64); callers check has_avx2_fma() at
// run time and keep a scalar path.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define GPULAB_AVX2_LANES 1
#endif

namespace gpulab::train {

// The two element types these kernels take.
inline bool is_float_or_bf16(c10::ScalarType type) {
  return type == c10::kFloat || type == c10::kBFloat16;
}

// fn(float{}) or fn(c10::BFloat16{}): the element type a kernel instantiates for `type`.
template <typename F>
void float_or_bf16(c10::ScalarType type, F&& fn) {
  if (type == c10::kBFloat16) return fn(c10::BFloat16{});
  TORCH_CHECK(type == c10::kFloat, "expected float32 or bfloat16, got ", type);
  fn(float{});
}

#if defined(GPULAB_AVX2_LANES)
inline bool has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// The AVX-512 subsets libtorch's oneDNN kernels need for its fast bf16 and float32 products.
inline bool has_avx512_core() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return has;
}

// Those and vdpbf16ps (bf16 pairs summed into float32 lanes), gpulab's bf16 weight gradient's.
inline bool has_avx512_bf16() {
  static const bool has = has_avx512_core() && __builtin_cpu_supports("avx512bf16");
  return has;
}

__attribute__((target("avx2,fma"))) inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}

// bfloat16 is the upper half of a float32: widening is a shift.
__attribute__((target("avx2,fma"))) inline __m256 load8(const c10::BFloat16* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

__attribute__((target("avx2,fma"))) inline void store8(float* p, __m256 v) {
  _mm256_storeu_ps(p, v);
}

// Rounded to nearest even as c10::BFloat16 rounds, NaN stored as c10's quiet NaN (0x7fc0).
__attribute__((target("avx2,fma"))) inline void store8(c10::BFloat16* p, __m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7fc0), nan);
  const __m128i packed =
      _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

// Sum of the eight lanes.
__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) as Cephes' expf: x = n ln2 + r, a degree-5 polynomial for exp(r), 2^n from the exponent
// bits; within 2 ulp on [-88.37, 88.37], clamped outside, NaN kept (max/min return their second
// operand when one is NaN).
__attribute__((target("avx2,fma"))) inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.3762626647949f),
                    _mm256_max_ps(_mm256_set1_ps(-88.3762626647949f), x));
  __m256 n = _mm256_floor_ps(
      _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  for (float c :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(c));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}
#endif

}  // namespace gpulab::train
