// Causal attention on batched products and two softmax passes (see batched_attention.h): the
// row passes in AVX2 for float32 and bfloat16 where the CPU has it, scalar code otherwise.
#include "train/ops/batched_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "train/ops/attention_rows.h"
#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/head_groups.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

std::atomic<bool> g_batched{true};

// Query rows per block, at least (row_blocks): at 256 positions, four blocks took the products
// of a bf16 llama-125m step from 421 ms (one block) and 365 (two) to 282-319 ms (profiles of 4
// steps).
constexpr int64_t kBlockRows = 64;

// One row of scores s (n visible keys of len): s <- softmax(s * scale) over the n, zero past them.
// e: n elements of scratch.
template <typename T>
void softmax_row_scalar(T* s, int64_t n, int64_t len, Wide<T> scale, Wide<T>* e) {
  using W = Wide<T>;
  W top = -std::numeric_limits<W>::infinity();
  for (int64_t j = 0; j < n; ++j) top = std::max(top, static_cast<W>(s[j]));
  W sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += e[j] = std::exp((static_cast<W>(s[j]) - top) * scale);
  for (int64_t j = 0; j < n; ++j) s[j] = static_cast<T>(e[j] / sum);
  std::fill(s + n, s + len, T(0));
}

// One row of the backward pass: d <- p * (d - sum(p * d)) * scale over the n, zero past them
// (d: the probabilities' gradient in, the scores' out).
template <typename T>
void softmax_back_row_scalar(const T* p, T* d, int64_t n, int64_t len, Wide<T> scale) {
  using W = Wide<T>;
  W dot = 0;
  for (int64_t j = 0; j < n; ++j) dot += static_cast<W>(p[j]) * static_cast<W>(d[j]);
  for (int64_t j = 0; j < n; ++j)
    d[j] = static_cast<T>(static_cast<W>(p[j]) * (static_cast<W>(d[j]) - dot) * scale);
  std::fill(d + n, d + len, T(0));
}

#if defined(GPULAB_AVX2_LANES)
__attribute__((target("avx2,fma"))) inline float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

template <typename T>
__attribute__((target("avx2,fma"))) void softmax_row_avx2(T* s, int64_t n, int64_t len, float scale,
                                                          float* e) {
  const int64_t whole = n / 8 * 8;
  __m256 vtop = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < whole; j += 8) vtop = _mm256_max_ps(vtop, load8(s + j));
  float top = max8(vtop);
  for (int64_t j = whole; j < n; ++j) top = std::max(top, static_cast<float>(s[j]));
  const __m256 vscale = _mm256_set1_ps(scale), vshift = _mm256_set1_ps(-top * scale);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 8) {
    const __m256 x = exp8(_mm256_fmadd_ps(load8(s + j), vscale, vshift));
    _mm256_storeu_ps(e + j, x);
    vsum = _mm256_add_ps(vsum, x);
  }
  float sum = sum8(vsum);
  for (int64_t j = whole; j < n; ++j)
    sum += e[j] = std::exp((static_cast<float>(s[j]) - top) * scale);
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (int64_t j = 0; j < whole; j += 8) store8(s + j, _mm256_mul_ps(_mm256_loadu_ps(e + j), inv));
  for (int64_t j = whole; j < n; ++j) s[j] = static_cast<T>(e[j] / sum);
  std::fill(s + n, s + len, T(0));
}

template <typename T>
__attribute__((target("avx2,fma"))) void softmax_back_row_avx2(const T* p, T* d, int64_t n,
                                                               int64_t len, float scale) {
  const int64_t whole = n / 8 * 8;
  __m256 vdot = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 8) vdot = _mm256_fmadd_ps(load8(p + j), load8(d + j), vdot);
  float dot = sum8(vdot);
  for (int64_t j = whole; j < n; ++j) dot += static_cast<float>(p[j]) * static_cast<float>(d[j]);
  const __m256 vd = _mm256_set1_ps(dot), vscale = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < whole; j += 8)
    store8(d + j,
           _mm256_mul_ps(_mm256_mul_ps(load8(p + j), _mm256_sub_ps(load8(d + j), vd)), vscale));
  for (int64_t j = whole; j < n; ++j)
    d[j] = static_cast<T>(static_cast<float>(p[j]) * (static_cast<float>(d[j]) - dot) * scale);
  std::fill(d + n, d + len, T(0));
}
#endif

// fn(row, visible keys) for every row of one row block's scores, G x rows*rep x keys: row
// i*rep + j is query head j of the group at position first + i, which sees keys 0 .. first + i.
// Split between threads in whole ranges of rows (each row's work is its own: the result does not
// depend on the split).
template <typename F>
void for_rows(const Tensor& block, int64_t first, int64_t rep, const F& fn) {
  const int64_t rows = block.size(1), all = block.size(0) * rows;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), all / 64));
  const int64_t per = (all + chunks - 1) / chunks;
  parallel_chunks(chunks, [&](int64_t c) {
    for (int64_t r = c * per; r < std::min(all, (c + 1) * per); ++r)
      fn(r, first + r % rows / rep + 1);
  });
}

template <typename T>
void softmax_rows(Tensor& scores, int64_t first, int64_t rep, double scale) {
  const int64_t len = scores.size(2);
  T* s = scores.data_ptr<T>();
  for_rows(scores, first, rep, [&](int64_t r, int64_t n) {
    thread_local std::vector<Wide<T>> e;
    e.resize(static_cast<size_t>(len));
#if defined(GPULAB_AVX2_LANES)
    if constexpr (!std::is_same_v<T, double>) {
      if (has_avx2_fma())
        return softmax_row_avx2(s + r * len, n, len, static_cast<float>(scale), e.data());
    }
#endif
    softmax_row_scalar(s + r * len, n, len, static_cast<Wide<T>>(scale), e.data());
  });
}

template <typename T>
void softmax_back_rows(const Tensor& probs, Tensor& grad, int64_t first, int64_t rep,
                       double scale) {
  const int64_t len = probs.size(2);
  const T* p = probs.data_ptr<T>();
  T* d = grad.data_ptr<T>();
  for_rows(probs, first, rep, [&](int64_t r, int64_t n) {
#if defined(GPULAB_AVX2_LANES)
    if constexpr (!std::is_same_v<T, double>) {
      if (has_avx2_fma())
        return softmax_back_row_avx2(p + r * len, d + r * len, n, len, static_cast<float>(scale));
    }
#endif
    softmax_back_row_scalar(p + r * len, d + r * len, n, len, static_cast<Wide<T>>(scale));
  });
}

// B x H x T x D as BH x T x D, dense.
Tensor flat(const Tensor& x) {
  return x.reshape({x.size(0) * x.size(1), x.size(2), x.size(3)}).contiguous();
}

// Query rows in blocks: block j's rows see keys 0 .. its last row only, so the products skip the
// masked corner (a quarter of them at two blocks, 3/8 at four).
std::vector<std::pair<int64_t, int64_t>> row_blocks(int64_t t) {
  const int64_t count = std::max<int64_t>(1, t / kBlockRows), rows = (t + count - 1) / count;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (int64_t first = 0; first < t; first += rows)
    blocks.emplace_back(first, std::min(rows, t - first));
  return blocks;
}

// Queries q3 (G x T*rep x D, row t*rep + j: position t), keys k3 and values v3 (G x T x D), all
// dense: the output (G x T*rep x D) and each row block's probabilities, appended to probs.
Tensor attend_blocks(const Tensor& q3, const Tensor& k3, const Tensor& v3,
                     std::vector<Tensor>& probs) {
  const int64_t rep = q3.size(1) / k3.size(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q3.size(2)));
  std::vector<Tensor> outs;
  for (const auto& [first, rows] : row_blocks(k3.size(1))) {
    const int64_t keys = first + rows;
    auto p = at::bmm(q3.narrow(1, first * rep, rows * rep), k3.narrow(1, 0, keys).transpose(1, 2));
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, p.scalar_type(), "batched_attention",
                                   [&] { softmax_rows<scalar_t>(p, first, rep, scale); });
    outs.push_back(at::bmm(p, v3.narrow(1, 0, keys)));
    probs.push_back(p);
  }
  return outs.size() == 1 ? outs[0] : at::cat(outs, 1);
}

// The gradients of q3, k3 and v3 from the output's (go3, dense like q3); probs from attend_blocks.
// A key/value head's gradient sums its rep query heads' inside the products.
std::array<Tensor, 3> attend_blocks_backward(const Tensor& q3, const Tensor& k3, const Tensor& v3,
                                             const Tensor* probs, const Tensor& go3) {
  const int64_t rep = q3.size(1) / k3.size(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q3.size(2)));
  auto dk = at::zeros_like(k3), dv = at::zeros_like(v3);
  std::vector<Tensor> dqs;
  for (const auto& [first, rows] : row_blocks(k3.size(1))) {
    const int64_t keys = first + rows;
    const auto& p = *probs++;
    auto go_rows = go3.narrow(1, first * rep, rows * rep);
    dv.narrow(1, 0, keys).add_(at::bmm(p.transpose(1, 2), go_rows));
    auto ds = at::bmm(go_rows, v3.narrow(1, 0, keys).transpose(1, 2));
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, ds.scalar_type(), "batched_attention_backward",
                                   [&] { softmax_back_rows<scalar_t>(p, ds, first, rep, scale); });
    dqs.push_back(at::bmm(ds, k3.narrow(1, 0, keys)));
    dk.narrow(1, 0, keys).add_(at::bmm(ds.transpose(1, 2), q3.narrow(1, first * rep, rows * rep)));
  }
  return {dqs.size() == 1 ? dqs[0] : at::cat(dqs, 1), dk, dv};
}

// B x H x T x D in and out (keys and values expanded to the query heads).
struct BatchedAttention : torch::autograd::Function<BatchedAttention> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v) {
    auto q3 = flat(q), k3 = flat(k), v3 = flat(v);
    std::vector<Tensor> saved = {q3, k3, v3};
    auto out = attend_blocks(q3, k3, v3, saved);
    ctx->save_for_backward(saved);
    return out.view(q.sizes());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q3 = saved[0], &k3 = saved[1], &v3 = saved[2];
    auto go = grads[0].to(q3.scalar_type()).reshape(q3.sizes()).contiguous();
    auto [dq, dk, dv] = attend_blocks_backward(q3, k3, v3, saved.data() + 3, go);
    const auto shape = grads[0].sizes();
    return {dq.view(shape), dk.view(shape), dv.view(shape)};
  }
};

// The projections' layout in and out (B x T x heads*D; keys and values B x T x kv_heads*D), the
// rotary embedding applied on the way in.
struct GroupedAttention : torch::autograd::Function<GroupedAttention> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& cos, const Tensor& sin, int64_t heads) {
    const int64_t d = q.size(2) / heads, groups = k.size(2) / d;
    auto q3 = to_head_groups(q, groups, d, cos, sin), k3 = to_head_groups(k, groups, d, cos, sin),
         v3 = to_head_groups(v, groups, d);
    std::vector<Tensor> saved = {q3, k3, v3, cos, sin};
    auto out = attend_blocks(q3, k3, v3, saved);
    ctx->save_for_backward(saved);
    ctx->saved_data["batch"] = q.size(0);
    return from_head_groups(out, q.size(0), q.size(1));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q3 = saved[0], &k3 = saved[1], &v3 = saved[2], &cos = saved[3], &sin = saved[4];
    const int64_t b = ctx->saved_data["batch"].toInt(), t = k3.size(1), d = q3.size(2);
    auto go = to_head_groups(grads[0].to(q3.scalar_type()), k3.size(0) / b, d);
    auto [dq, dk, dv] = attend_blocks_backward(q3, k3, v3, saved.data() + 5, go);
    return {from_head_groups(dq, b, t, cos, sin),
            from_head_groups(dk, b, t, cos, sin),
            from_head_groups(dv, b, t),
            Tensor(),
            Tensor(),
            Tensor()};
  }
};

// q B x T x heads*D, k and v B x T x groups*D (heads a multiple of groups, D even), one element
// type and device, rotary tables for them; T > 1.
bool grouped_shapes_fit(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                        const Tensor& cos, const Tensor& sin) {
  if (q.dim() != 3 || k.dim() != 3 || k.sizes() != v.sizes() || heads <= 0) return false;
  const auto type = q.scalar_type();
  if (k.scalar_type() != type || v.scalar_type() != type || k.device() != q.device() ||
      v.device() != q.device() || q.size(2) % heads != 0)
    return false;
  const int64_t b = q.size(0), t = q.size(1), d = q.size(2) / heads;
  if (t < 2 || d % 2 != 0 || k.size(0) != b || k.size(1) != t || k.size(2) % d != 0) return false;
  const int64_t groups = k.size(2) / d;
  return groups > 0 && heads % groups == 0 && rotary_tables_fit(cos, sin, b, t, d);
}

// Whether `matrices` (B x query heads) T x T probabilities of q's type fit kBatchedAttentionBytes.
bool probabilities_fit(int64_t matrices, int64_t t, const Tensor& q) {
  return matrices * t * t * static_cast<int64_t>(q.element_size()) <= kBatchedAttentionBytes;
}

}  // namespace

bool set_batched_attention(bool on) {
  return g_batched.exchange(on);
}

bool batched_attention_enabled() {
  return g_batched && cpu_kernels_enabled();
}

bool batched_attention_serves(torch::Device device, torch::ScalarType type) {
  return batched_attention_enabled() && device.is_cpu() &&
         (type == torch::kFloat || type == torch::kBFloat16 || type == torch::kDouble);
}

bool batched_attention_applies(const torch::Tensor& q, const torch::Tensor& k) {
  if (!batched_attention_serves(q.device(), q.scalar_type()) || q.dim() != 4) return false;
  if (k.sizes() != q.sizes() || k.scalar_type() != q.scalar_type() || q.size(2) < 2) return false;
  return probabilities_fit(q.size(0) * q.size(1), q.size(2), q);
}

bool grouped_attention_applies(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t heads, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
  return batched_attention_serves(q.device(), q.scalar_type()) &&
         grouped_shapes_fit(q, k, v, heads, cos, sin) &&
         probabilities_fit(q.size(0) * heads, q.size(1), q);
}

torch::Tensor batched_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v) {
  TORCH_CHECK(q.sizes() == k.sizes() && k.sizes() == v.sizes() && q.dim() == 4,
              "batched_causal_attention: q, k, v must be B x H x T x D alike");
  return BatchedAttention::apply(q, k, v.to(q.scalar_type()));
}

torch::Tensor grouped_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, const torch::Tensor& cos,
                                       const torch::Tensor& sin, int64_t heads) {
  TORCH_CHECK(grouped_shapes_fit(q, k, v, heads, cos, sin),
              "grouped_causal_attention: q must be B x T x heads*D, k and v B x T x kv_heads*D "
              "(heads a multiple of kv_heads, D even, one dtype), cos and sin float32 rotary "
              "tables of T x D");
  return GroupedAttention::apply(q, k, v, cos, sin, heads);
}

}  // namespace gpulab::train
