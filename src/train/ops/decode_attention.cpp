// One query a row against the KV cache (decode_attention.h).
#include "train/ops/decode_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {

namespace {

#if defined(GPULAB_AVX2_LANES)
__attribute__((target("avx2,fma"))) float dot(const float* a, const float* b, int64_t d) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) acc = _mm256_fmadd_ps(load8(a + i), load8(b + i), acc);
  float s = sum8(acc);
  for (; i < d; ++i) s += a[i] * b[i];
  return s;
}

// out += w * x over d elements.
__attribute__((target("avx2,fma"))) void add_scaled(float* out, float w, const float* x,
                                                    int64_t d) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) store8(out + i, _mm256_fmadd_ps(wv, load8(x + i), load8(out + i)));
  for (; i < d; ++i) out[i] += w * x[i];
}

// Where each operand's rows lie (strides in elements).
struct Layout {
  int64_t heads, kv_heads, s, d;
  int64_t q_b, q_h, k_b, k_h, k_s, v_b, v_h, v_s;
  const float *q, *k, *v;
  const bool* mask;  // [B, S] (its own strides below), or null
  int64_t m_b, m_s;
  float* out;  // [B, H * D] dense
};

// Row b, head h: scores, softmax (max subtracted), then the weighted values into out.
void one_head(const Layout& l, int64_t b, int64_t h, std::vector<float>& scores) {
  const int64_t g = h / (l.heads / l.kv_heads);
  const float* q = l.q + b * l.q_b + h * l.q_h;
  const float* k = l.k + b * l.k_b + g * l.k_h;
  const float* v = l.v + b * l.v_b + g * l.v_h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(l.d));
  float top = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < l.s; ++s) {
    const bool seen = l.mask == nullptr || l.mask[b * l.m_b + s * l.m_s];
    scores[static_cast<size_t>(s)] =
        seen ? dot(q, k + s * l.k_s, l.d) * scale : -std::numeric_limits<float>::infinity();
    top = std::max(top, scores[static_cast<size_t>(s)]);
  }
  float* out = l.out + (b * l.heads + h) * l.d;
  std::fill(out, out + l.d, 0.0f);
  if (top == -std::numeric_limits<float>::infinity()) return;  // nothing to attend to
  float total = 0;
  for (int64_t s = 0; s < l.s; ++s) {
    const float p = std::exp(scores[static_cast<size_t>(s)] - top);
    if (p == 0.0f) continue;
    total += p;
    add_scaled(out, p, v + s * l.v_s, l.d);
  }
  const float inv = 1.0f / total;
  for (int64_t i = 0; i < l.d; ++i) out[i] *= inv;
}

void run(const Layout& l, int64_t batch) {
  const int64_t pairs = batch * l.heads;
  // Two workers only where there is work enough to pay for starting one.
  const bool big = pairs * l.s * l.d >= (int64_t{1} << 15);
  const int64_t workers = big ? std::min<int64_t>(at::get_num_threads(), pairs) : 1;
  parallel_chunks(workers, [&](int64_t t) {
    std::vector<float> scores(static_cast<size_t>(l.s));
    for (int64_t p = pairs * t / workers; p < pairs * (t + 1) / workers; ++p)
      one_head(l, p / l.heads, p % l.heads, scores);
  });
}
#endif

}  // namespace

bool decode_attention_applies(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& mask) {
#if defined(GPULAB_AVX2_LANES)
  if (!cpu_kernels_enabled() || !has_avx2_fma()) return false;
  for (const auto* t : {&q, &k, &v})
    if (t->scalar_type() != torch::kFloat || !t->device().is_cpu() || t->dim() != 4 ||
        t->stride(3) != 1)
      return false;
  if (torch::GradMode::is_enabled() &&
      (q.requires_grad() || k.requires_grad() || v.requires_grad()))
    return false;
  const int64_t b = q.size(0), heads = q.size(1), d = q.size(3);
  if (q.size(2) != 1 || k.sizes() != v.sizes() || k.size(0) != b || k.size(3) != d ||
      k.size(1) == 0 || heads % k.size(1) != 0 || k.size(2) == 0)
    return false;
  if (mask.defined() &&
      (mask.scalar_type() != torch::kBool || !mask.device().is_cpu() || mask.dim() != 4 ||
       mask.size(0) != b || mask.size(1) != 1 || mask.size(2) != 1 || mask.size(3) != k.size(2)))
    return false;
  return true;
#else
  return false;
#endif
}

torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask) {
  const int64_t b = q.size(0), heads = q.size(1), d = q.size(3);
  auto out = torch::empty({b, 1, heads * d}, q.options());
#if defined(GPULAB_AVX2_LANES)
  Layout l{heads,
           k.size(1),
           k.size(2),
           d,
           q.stride(0),
           q.stride(1),
           k.stride(0),
           k.stride(1),
           k.stride(2),
           v.stride(0),
           v.stride(1),
           v.stride(2),
           q.data_ptr<float>(),
           k.data_ptr<float>(),
           v.data_ptr<float>(),
           mask.defined() ? mask.data_ptr<bool>() : nullptr,
           mask.defined() ? mask.stride(0) : 0,
           mask.defined() ? mask.stride(3) : 0,
           out.data_ptr<float>()};
  if (out.numel() > 0) run(l, b);
#endif
  return out;
}

}  // namespace gpulab::train
