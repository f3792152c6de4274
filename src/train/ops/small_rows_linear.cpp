// A few rows of x times a weight, each weight row read once (small_rows_linear.h).
#include "train/ops/small_rows_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/parallel_chunks.h"
#include "train/precision.h"

namespace gpulab::train {

namespace {

#if defined(GPULAB_AVX2_LANES)
// y[i][j] = x[i] . w[j] for MR rows of x and NR rows of w, each of length k (x rows ldx apart,
// w rows k apart, y rows ldy apart): MR x NR accumulators of eight lanes over k.
template <int MR, int NR>
__attribute__((target("avx2,fma"))) void tile(const float* x, int64_t ldx, const float* w,
                                              int64_t k, float* y, int64_t ldy) {
  // Unrolled in full, so the accumulators live in registers (-O2 would keep them in memory).
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w + j * k + p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float s = sum8(acc[i][j]);
      for (int64_t q = p; q < k; ++q) s += x[i * ldx + q] * w[j * k + q];
      y[i * ldy + j] = s;
    }
}

// NR rows of w from row j against every row of x (m of them), into y's columns j .. j+NR-1.
template <int NR>
void rows_of_w(const float* x, int64_t m, const float* w, int64_t k, float* y, int64_t n,
               int64_t j) {
  constexpr int kMr = 3;  // 3 x 4 accumulators and 4 + 1 loads fit AVX2's 16 registers
  int64_t i = 0;
  for (; i + kMr <= m; i += kMr) tile<kMr, NR>(x + i * k, k, w + j * k, k, y + i * n + j, n);
  if (m - i == 2) tile<2, NR>(x + i * k, k, w + j * k, k, y + i * n + j, n);
  if (m - i == 1) tile<1, NR>(x + i * k, k, w + j * k, k, y + i * n + j, n);
}

void product(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y) {
  constexpr int kNr = 4;
  // Blocks of weight rows, a few per thread so a slow thread does not hold up the rest, dealt
  // round-robin to libtorch's intra-op thread count (--threads) and no more workers.
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const int64_t block = std::max<int64_t>(kNr, (n / (threads * 4) + kNr - 1) / kNr * kNr);
  const int64_t blocks = (n + block - 1) / block;
  const int64_t workers = std::min(threads, blocks);
  parallel_chunks(workers, [&](int64_t t) {
    for (int64_t b = t; b < blocks; b += workers) {
      const int64_t end = std::min(n, (b + 1) * block);
      int64_t j = b * block;
      for (; j + kNr <= end; j += kNr) rows_of_w<kNr>(x, m, w, k, y, n, j);
      for (; j < end; ++j) rows_of_w<1>(x, m, w, k, y, n, j);
    }
  });
}
#endif

}  // namespace

bool cpu_fp32_inference_product(const torch::Tensor& x, const torch::Tensor& w) {
#if defined(GPULAB_AVX2_LANES)
  if (!cpu_kernels_enabled() || !has_avx2_fma()) return false;
  if (x.scalar_type() != torch::kFloat || w.scalar_type() != torch::kFloat ||
      !x.device().is_cpu() || !w.device().is_cpu() || w.dim() != 2 || x.dim() < 1)
    return false;
  if (torch::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad())) return false;
  // Under autocast the product is autocast's (a bf16 or fp16 one), not float32's.
  return active_autocast(x.device()) == Precision::kFp32;
#else
  return false;
#endif
}

bool small_rows_linear_applies(const torch::Tensor& x, const torch::Tensor& w) {
#if defined(GPULAB_AVX2_LANES)
  if (!cpu_fp32_inference_product(x, w) || !w.is_contiguous()) return false;
  const int64_t k = w.size(1);
  if (k == 0 || x.size(-1) != k || w.size(0) == 0) return false;
  const int64_t rows = x.numel() / k;
  return rows <= kFewRows || (rows <= kSmallRows && w.numel() >= kLargeWeight);
#else
  return false;
#endif
}

torch::Tensor small_rows_linear(const torch::Tensor& x, const torch::Tensor& w) {
  auto shape = x.sizes().vec();
  shape.back() = w.size(0);
  auto y = torch::empty(shape, x.options());
#if defined(GPULAB_AVX2_LANES)
  const auto xc = x.contiguous();
  const int64_t k = w.size(1);
  if (y.numel() > 0)
    product(xc.data_ptr<float>(), xc.numel() / k, w.data_ptr<float>(), w.size(0), k,
            y.data_ptr<float>());
#endif
  return y;
}

}  // namespace gpulab::train
