// dW = dY^T X in gpulab's AVX-512 kernels (weight_grad.h).
#include "train/ops/weight_grad.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/int_math.h"
#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {
namespace weight_grad_kernel {  // its own names: the ops folder compiles as one unit

#if defined(GPULAB_AVX2_LANES)

// A tile of dW: kMr rows by kNr columns (four 16-lane registers), 24 accumulators. A step of the
// summed dimension reads kNv vectors of X's panel and broadcasts kMr values of dY's.
constexpr int kMr = 6;
constexpr int kNv = 4;
constexpr int kNr = 16 * kNv;
// Batch rows per 32-bit lane: vdpbf16ps sums pairs of bf16 products, so bf16 panels hold, for
// each column, two consecutive rows side by side.
template <typename E>
constexpr int kPair = sizeof(E) == 2 ? 2 : 1;

// Batch rows per packed block: 512 steps of the kernel (fewer blocks: dW's tiles are reloaded once
// per block); dW rows per packed block of dY. Chosen on the 2-core Zen 4 (bf16 at 1,024 rows
// 2-6 % faster than at 512, float32 within 2 % of the best tried).
template <typename E>
constexpr int64_t kKc = 512 * kPair<E>;
constexpr int64_t kMc = 192;
// Elements past each packed 6-row panel of dY: the panels of a 512-step block are 12 KiB apart,
// so without a cache line between them a step's 32 pieces share one L1 set (the same aliasing as
// Product::panel_stride's).
template <typename E>
constexpr int64_t kDyPad = 64 / sizeof(E);
// A thread's packed dY: the padded panels of one band of at most kMc rows (then a step's row).
template <typename E>
constexpr int64_t kDyPanels = ceil_div(kMc, kMr) * (kMr * kKc<E> + kDyPad<E>);

// The operands as row-major element arrays (E: float, or uint16_t for bf16's bits); dW = a^T b
// with a [k, m] and b [k, n].
template <typename E>
struct Product {
  const E* a;
  const E* b;
  float* c;
  int64_t m, n, k;

  // X's panels of kNr columns, and the blocks of kKc batch rows.
  int64_t panels() const { return ceil_div(n, kNr); }
  int64_t blocks() const { return ceil_div(k, kKc<E>); }
  // Elements from one packed panel of X to the next: a step's piece more than its blocks, so that
  // a step's pieces in consecutive panels fall in different cache sets (at 128 KiB apart they
  // share the sets of L1 and L2). With kDyPad, cold, in one process: up to 2 % faster, e.g. a
  // 256 x 768 bf16 product at 0.86 of oneDNN's forward product's speed unpadded, 0.88 padded.
  int64_t panel_stride() const { return blocks() * kKc<E> * kNr + kNr * kPair<E>; }
};

// Both forms carry the BF16 target; the float32 one contains no BF16 instruction, so a CPU
// without BF16 (weight_grad_applies's float32 check) runs it.
template <typename E>
__attribute__((target("avx512f,avx512bf16"))) void tile(int64_t steps, const E* ap, const E* bp,
                                                        float* c, int64_t ldc, bool add) {
  __m512 acc[kMr][kNv];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNv; ++j)
      acc[i][j] = add ? _mm512_loadu_ps(c + i * ldc + 16 * j) : _mm512_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    if constexpr (sizeof(E) == 4) {
      __m512 b[kNv];
#pragma GCC unroll 4
      for (int j = 0; j < kNv; ++j) b[j] = _mm512_loadu_ps(bp + s * kNr + 16 * j);
#pragma GCC unroll 8
      for (int i = 0; i < kMr; ++i) {
        const __m512 a = _mm512_set1_ps(ap[s * kMr + i]);
#pragma GCC unroll 4
        for (int j = 0; j < kNv; ++j) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
      }
    } else {
      __m512bh b[kNv];
#pragma GCC unroll 4
      for (int j = 0; j < kNv; ++j)
        b[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + 2 * (s * kNr + 16 * j)));
      uint32_t pair;
#pragma GCC unroll 8
      for (int i = 0; i < kMr; ++i) {
        std::memcpy(&pair, ap + 2 * (s * kMr + i), sizeof pair);
        const auto a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
#pragma GCC unroll 4
        for (int j = 0; j < kNv; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], a, b[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kNv; ++j) _mm512_storeu_ps(c + i * ldc + 16 * j, acc[i][j]);
}

// A partial tile (dW's last rows or columns): through a full tile in scratch memory.
template <typename E>
void edge_tile(int64_t steps, const E* ap, const E* bp, float* c, int64_t ldc, bool add,
               int64_t rows, int64_t cols) {
  float scratch[kMr * kNr];
  if (add)
    for (int64_t i = 0; i < rows; ++i) std::memcpy(scratch + i * kNr, c + i * ldc, cols * 4);
  tile<E>(steps, ap, bp, scratch, kNr, add);
  for (int64_t i = 0; i < rows; ++i) std::memcpy(c + i * ldc, scratch + i * kNr, cols * 4);
}

// bf16 rows r0 and r1 (r1 == nullptr: zeros) into `width` pairs (r0[j], r1[j]), zero past `cols`.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_pairs(const uint16_t* r0,
                                                                     const uint16_t* r1,
                                                                     int64_t cols, int width,
                                                                     uint16_t* dst) {
  for (int j = 0; j < width; j += 16) {
    const auto live = static_cast<unsigned>(std::clamp<int64_t>(cols - j, 0, 16));
    const auto load = static_cast<__mmask16>((1u << live) - 1);
    const auto lanes = static_cast<__mmask16>((1u << std::min(16, width - j)) - 1);
    // The maskz forms: GCC 12 warns of the plain ones' undefined source register.
    constexpr __mmask16 kAll = 0xffff;
    __m512i v = _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(load, r0 + j));
    if (r1 != nullptr) {
      const __m512i high =
          _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(load, r1 + j));
      v = _mm512_or_si512(v, _mm512_maskz_slli_epi32(kAll, high, 16));
    }
    _mm512_mask_storeu_epi32(dst + 2 * j, lanes, v);
  }
}

// Elements of a step's row buffer for `cols` columns: pack_pairs writes whole 16-lane vectors.
template <typename E>
constexpr int64_t row_elements(int64_t cols) {
  return (round_up(cols, 16) + kNr) * kPair<E>;
}

// One step (row r0, and in bf16 r1, nullptr past the end) into the step's place in each panel of
// `Width` columns, panels `stride` elements apart, zero past cols: a fixed-size piece to each
// panel, straight from r0 in float32 (`row` holds the last, partial one), from `row` in bf16,
// where the step's pairs are laid out side by side first. Why not panel by panel: packing so, a
// call per 6-column piece of dY, took a sixth of a 768 x 768 bf16 product's time.
template <typename E, int Width>
void pack_step(const E* r0, const E* r1, int64_t cols, E* row, E* dst, int64_t stride) {
  constexpr int64_t kPiece = Width * kPair<E>;
  const int64_t panels = ceil_div(cols, Width);
  int64_t full = panels, written = cols;  // pieces taken straight from `from`; columns in row
  const E* from = row;
  if constexpr (sizeof(E) == 4) {
    from = r0;
    full = cols / Width;
    std::memcpy(row + full * Width, r0 + full * Width, (cols - full * Width) * sizeof(E));
  } else {
    written = round_up(cols, 16);
    pack_pairs(r0, r1, cols, static_cast<int>(written), row);
  }
  std::fill(row + std::min(written, panels * Width) * kPair<E>, row + panels * kPiece, E{0});
  for (int64_t p = 0; p < full; ++p)
    std::memcpy(dst + p * stride, from + p * kPiece, kPiece * sizeof(E));
  if (full < panels) std::memcpy(dst + full * stride, row + full * kPiece, kPiece * sizeof(E));
}

template <typename E>
int64_t steps_of(int64_t kc) {
  return ceil_div(kc, kPair<E>);
}

// X's panels, packed once for every thread (the threads split the steps): panel p's block q at
// p * panel_stride + q * kKc<E> * kNr, so batch row r's step lands at r * kNr in panel 0.
template <typename E>
std::unique_ptr<E[]> pack_x(const Product<E>& pr) {
  const int64_t panels = pr.panels(), steps = steps_of<E>(pr.k);
  auto packed = std::make_unique_for_overwrite<E[]>(panels * pr.panel_stride());
  const int64_t chunks = std::min<int64_t>(at::get_num_threads(), steps);
  const int64_t row_len = row_elements<E>(pr.n);
  const auto rows = std::make_unique_for_overwrite<E[]>(chunks * row_len);
  const int64_t stride = pr.panel_stride();
  parallel_chunks(chunks, [&](int64_t t) {
    for (int64_t g = steps * t / chunks; g < steps * (t + 1) / chunks; ++g) {
      const int64_t r = g * kPair<E>;
      const E* r0 = pr.b + r * pr.n;
      pack_step<E, kNr>(r0, r + 1 < pr.k ? r0 + pr.n : nullptr, pr.n, rows.get() + t * row_len,
                        packed.get() + r * kNr, stride);
    }
  });
  return packed;
}

// dW rows [row0, row0 + rows) for batch block q: dY's block packed here, then every tile.
template <typename E>
void rows_block(const Product<E>& pr, const E* packed_x, int64_t row0, int64_t rows, int64_t q,
                E* packed_dy, E* row) {
  const int64_t kc = std::min(kKc<E>, pr.k - q * kKc<E>), steps = steps_of<E>(kc);
  const int64_t panels = pr.panels();
  const int64_t dy_stride = kMr * steps * kPair<E> + kDyPad<E>;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t r = q * kKc<E> + s * kPair<E>;
    const E* r0 = pr.a + r * pr.m + row0;
    pack_step<E, kMr>(r0, r + 1 < pr.k ? r0 + pr.m : nullptr, rows, row,
                      packed_dy + s * kMr * kPair<E>, dy_stride);
  }
  for (int64_t p = 0; p < panels; ++p) {
    const E* bp = packed_x + p * pr.panel_stride() + q * kKc<E> * kNr;
    const int64_t cols = std::min<int64_t>(kNr, pr.n - p * kNr);
    for (int64_t i = 0; i < rows; i += kMr) {
      const E* ap = packed_dy + i / kMr * dy_stride;
      float* c = pr.c + (row0 + i) * pr.n + p * kNr;
      const int64_t tile_rows = std::min<int64_t>(kMr, rows - i);
      if (tile_rows == kMr && cols == kNr)
        tile<E>(steps, ap, bp, c, pr.n, q > 0);
      else
        edge_tile<E>(steps, ap, bp, c, pr.n, q > 0, tile_rows, cols);
    }
  }
}

// dW = a^T b: X packed once, then each thread takes a band of dW's rows (dY's columns), packing
// its dY blocks into its own buffer (allocated here: the threads' work must not throw).
template <typename E>
void product(const Product<E>& pr) {
  const auto packed_x = pack_x(pr);
  const int64_t tiles = ceil_div(pr.m, kMr), blocks = pr.blocks();
  const int64_t chunks = std::min<int64_t>(at::get_num_threads(), tiles);
  constexpr int64_t kDyBlock = kDyPanels<E> + row_elements<E>(kMc);
  const auto packed_dy = std::make_unique_for_overwrite<E[]>(chunks * kDyBlock);
  parallel_chunks(chunks, [&](int64_t t) {
    const int64_t first = tiles * t / chunks * kMr;
    const int64_t last = std::min(pr.m, tiles * (t + 1) / chunks * kMr);
    for (int64_t row0 = first; row0 < last; row0 += kMc)
      for (int64_t q = 0; q < blocks; ++q)
        rows_block(pr, packed_x.get(), row0, std::min(kMc, last - row0), q,
                   packed_dy.get() + t * kDyBlock, packed_dy.get() + t * kDyBlock + kDyPanels<E>);
  });
}

#endif  // GPULAB_AVX2_LANES

}  // namespace weight_grad_kernel
}  // namespace

bool weight_grad_applies(const torch::Tensor& dy, const torch::Tensor& x) {
#if defined(GPULAB_AVX2_LANES)
  if (!cpu_kernels_enabled() || dy.dim() != 2 || x.dim() != 2 || dy.size(0) != x.size(0) ||
      !dy.device().is_cpu() || !x.device().is_cpu() || dy.scalar_type() != x.scalar_type())
    return false;
  if (dy.scalar_type() == torch::kFloat) return has_avx512_core();
  return dy.scalar_type() == torch::kBFloat16 && has_avx512_bf16();
#else
  (void)dy;
  (void)x;
  return false;
#endif
}

torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x) {
  TORCH_CHECK(weight_grad_applies(dy, x), "weight_grad: operands it does not take (",
              dy.scalar_type(), " ", dy.sizes(), ", ", x.scalar_type(), " ", x.sizes(), ")");
  RECORD_FUNCTION("gpulab::weight_grad", std::vector<c10::IValue>({dy, x}));
  const int64_t m = dy.size(1), n = x.size(1), k = dy.size(0);
  if (k == 0 || m == 0 || n == 0) return torch::zeros({m, n}, x.options().dtype(torch::kFloat));
  auto out = torch::empty({m, n}, x.options().dtype(torch::kFloat));
#if defined(GPULAB_AVX2_LANES)
  const auto a = dy.contiguous(), b = x.contiguous();
  if (a.scalar_type() == torch::kFloat)
    weight_grad_kernel::product<float>(
        {a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), m, n, k});
  else
    weight_grad_kernel::product<uint16_t>(
        {reinterpret_cast<const uint16_t*>(a.data_ptr<c10::BFloat16>()),
         reinterpret_cast<const uint16_t*>(b.data_ptr<c10::BFloat16>()), out.data_ptr<float>(), m,
         n, k});
#endif
  return out;
}

}  // namespace gpulab::train
