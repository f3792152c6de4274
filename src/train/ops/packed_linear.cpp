// Decode products against weights packed once per generation (packed_linear.h).
#include "train/ops/packed_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "core/error.h"
#include "train/ops/avx2_lanes.h"
#include "train/ops/small_rows_linear.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {

namespace {

thread_local PackedWeights* t_current = nullptr;

#if defined(GPULAB_AVX2_LANES)
// y[i][0..cols) = x[i] . panel columns for MR rows of x: MR x 2 accumulators of eight lanes,
// one broadcast of x and two loads of the panel per k (no sums across lanes at the end).
template <int MR>
__attribute__((target("avx2,fma"))) void panel_tile(const float* x, int64_t ldx, const float* panel,
                                                    int64_t k, float* y, int64_t ldy,
                                                    int64_t cols) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t q = 0; q < k; ++q) {
    const __m256 b0 = _mm256_loadu_ps(panel + q * kPanelColumns);
    const __m256 b1 = _mm256_loadu_ps(panel + q * kPanelColumns + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(x + i * ldx + q);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    if (cols == kPanelColumns) {
      _mm256_storeu_ps(y + i * ldy, acc[i][0]);
      _mm256_storeu_ps(y + i * ldy + 8, acc[i][1]);
      continue;
    }
    alignas(32) float tmp[kPanelColumns];
    _mm256_store_ps(tmp, acc[i][0]);
    _mm256_store_ps(tmp + 8, acc[i][1]);
    std::copy(tmp, tmp + cols, y + i * ldy);
  }
}

// Every row of x against one panel: tiles of six rows (12 accumulators keep both FMA pipes busy
// through their latency), the rest in one smaller tile.
void rows_of_panel(const float* x, int64_t m, const float* panel, int64_t k, float* y, int64_t n,
                   int64_t cols) {
  constexpr int kMr = 6;
  int64_t i = 0;
  for (; i + kMr <= m; i += kMr) panel_tile<kMr>(x + i * k, k, panel, k, y + i * n, n, cols);
  switch (m - i) {
    case 5:
      return panel_tile<5>(x + i * k, k, panel, k, y + i * n, n, cols);
    case 4:
      return panel_tile<4>(x + i * k, k, panel, k, y + i * n, n, cols);
    case 3:
      return panel_tile<3>(x + i * k, k, panel, k, y + i * n, n, cols);
    case 2:
      return panel_tile<2>(x + i * k, k, panel, k, y + i * n, n, cols);
    case 1:
      return panel_tile<1>(x + i * k, k, panel, k, y + i * n, n, cols);
    default:
      return;
  }
}

void panel_product(const float* x, int64_t m, const float* packed, int64_t n, int64_t k, float* y) {
  const int64_t panels = (n + kPanelColumns - 1) / kPanelColumns;
  // Runs of panels, a few per thread so a slow thread does not hold up the rest, dealt
  // round-robin to libtorch's intra-op thread count (--threads) and no more workers.
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const int64_t run = std::max<int64_t>(1, panels / (threads * 4));
  const int64_t runs = (panels + run - 1) / run;
  const int64_t workers = std::min(threads, runs);
  parallel_chunks(workers, [&](int64_t t) {
    for (int64_t r = t; r < runs; r += workers)
      for (int64_t p = r * run; p < std::min(panels, (r + 1) * run); ++p) {
        const int64_t col = p * kPanelColumns;
        rows_of_panel(x, m, packed + p * k * kPanelColumns, k, y + col, n,
                      std::min(kPanelColumns, n - col));
      }
  });
}
#endif

int64_t packed_bytes(const torch::Tensor& w, bool k_major) {
  const int64_t n = w.size(k_major ? 1 : 0), k = w.size(k_major ? 0 : 1);
  return (n + kPanelColumns - 1) / kPanelColumns * kPanelColumns * k *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace

torch::Tensor pack_weight(const torch::Tensor& w, bool k_major) {
  GPULAB_ASSERT(w.dim() == 2 && w.scalar_type() == torch::kFloat, "pack_weight: a 2-D float32");
  const auto nk = k_major ? w.t() : w;  // [N, K]
  const int64_t n = nk.size(0), k = nk.size(1);
  const int64_t panels = (n + kPanelColumns - 1) / kPanelColumns;
  auto padded = torch::zeros({panels * kPanelColumns, k}, w.options());
  padded.narrow(0, 0, n).copy_(nk);
  return padded.view({panels, kPanelColumns, k}).transpose(1, 2).contiguous();
}

torch::Tensor packed_linear(const torch::Tensor& x, const torch::Tensor& packed, int64_t n) {
  const int64_t k = packed.size(1);
  GPULAB_ASSERT(x.size(-1) == k && packed.size(0) * kPanelColumns >= n,
                "packed_linear: x's width is the packed weight's");
  auto shape = x.sizes().vec();
  shape.back() = n;
  auto y = torch::empty(shape, x.options());
#if defined(GPULAB_AVX2_LANES)
  const auto xc = x.contiguous();
  if (y.numel() > 0)
    panel_product(xc.data_ptr<float>(), xc.numel() / k, packed.data_ptr<float>(), n, k,
                  y.data_ptr<float>());
#else
  y = torch::matmul(x, packed.permute({1, 0, 2}).reshape({k, -1}).narrow(1, 0, n));
#endif
  return y;
}

PackedWeights::PackedWeights() : previous_(t_current) {
  t_current = this;
}

PackedWeights::~PackedWeights() {
  t_current = previous_;
}

const torch::Tensor* PackedWeights::find_or_pack(const torch::Tensor& w, bool k_major) {
  const void* key = w.unsafeGetTensorImpl();
  const auto version = w._version();
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (it->second.version == version) return &it->second.packed;
    bytes_ -= it->second.packed.numel() * static_cast<int64_t>(sizeof(float));
    entries_.erase(it);
  }
  if (bytes_ + packed_bytes(w, k_major) > kPackedBytesMax) return nullptr;
  Entry e{w, version, pack_weight(w, k_major)};
  bytes_ += e.packed.numel() * static_cast<int64_t>(sizeof(float));
  return &entries_.emplace(key, std::move(e)).first->second.packed;
}

torch::Tensor packed_decode_product(const torch::Tensor& x, const torch::Tensor& w, bool k_major) {
#if defined(GPULAB_AVX2_LANES)
  if (t_current == nullptr || !cpu_fp32_inference_product(x, w)) return {};
  const int64_t k = w.size(k_major ? 0 : 1), n = w.size(k_major ? 1 : 0);
  if (k == 0 || n == 0 || x.size(-1) != k) return {};
  const int64_t rows = x.numel() / k;
  if (rows < kPackedMinRows || rows > kPackedMaxRows) return {};
  const auto* packed = t_current->find_or_pack(w, k_major);
  if (packed == nullptr) return {};
  return packed_linear(x, *packed, n);
#else
  return {};
#endif
}

}  // namespace gpulab::train
