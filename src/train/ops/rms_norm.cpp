// Fused RMSNorm for the CPU (see rms_norm.h): rows split into fixed blocks between threads, each
// row read once for its statistic and once to normalise, AVX2 lanes where the CPU has them.
#include "train/ops/rms_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per block: the weight gradient is summed per block, then over blocks in order, so the
// result depends on the row count only, never on how many threads took the blocks.
int64_t block_rows(int64_t rows) {
  return std::max<int64_t>(16, (rows + 63) / 64);
}

// Runs fn(block, first_row, row_count) over the blocks, shared among libtorch's threads.
template <typename F>
void for_each_block(int64_t rows, const F& fn) {
  const int64_t per = block_rows(rows), blocks = (rows + per - 1) / per;
  const int64_t workers = std::min<int64_t>(at::get_num_threads(), blocks);
  parallel_chunks(workers, [&](int64_t w) {
    for (int64_t b = w; b < blocks; b += workers) fn(b, b * per, std::min(per, rows - b * per));
  });
}

// The row kernels on elements [i, d) (the scalar form, and the tail of the vector form).
template <typename In>
float sum_of_squares(const In* x, int64_t i, int64_t d) {
  float total = 0.0f;
  for (; i < d; ++i) total += static_cast<float>(x[i]) * static_cast<float>(x[i]);
  return total;
}

// y = w * (x * r).
template <typename In, typename Out>
void normalise(const In* x, const float* w, float r, int64_t i, int64_t d, Out* y) {
  for (; i < d; ++i) y[i] = static_cast<Out>(w[i] * (static_cast<float>(x[i]) * r));
}

// With n = x r and g = dy w: returns sum(g n) and adds dy n to dw_part.
template <typename In, typename Out>
float backward_dot(const Out* dy, const In* x, const float* w, float r, int64_t i, int64_t d,
                   float* dw_part) {
  float dot = 0.0f;
  for (; i < d; ++i) {
    const float n = static_cast<float>(x[i]) * r, g = static_cast<float>(dy[i]);
    dot += g * w[i] * n;
    dw_part[i] += g * n;
  }
  return dot;
}

// dx = r (g - n c), c = sum(g n) / d.
template <typename In, typename Out>
void backward_dx(const Out* dy, const In* x, const float* w, float r, float c, int64_t i, int64_t d,
                 In* dx) {
  for (; i < d; ++i) {
    const float n = static_cast<float>(x[i]) * r;
    dx[i] = static_cast<In>(r * (static_cast<float>(dy[i]) * w[i] - n * c));
  }
}

template <typename In, typename Out>
float forward_row_scalar(const In* x, const float* w, double eps, int64_t d, Out* y) {
  const float r =
      1.0f / std::sqrt(sum_of_squares(x, 0, d) / static_cast<float>(d) + static_cast<float>(eps));
  normalise(x, w, r, 0, d, y);
  return r;
}

template <typename In, typename Out>
void backward_row_scalar(const Out* dy, const In* x, const float* w, float r, int64_t d, In* dx,
                         float* dw_part) {
  const float c = backward_dot(dy, x, w, r, 0, d, dw_part) / static_cast<float>(d);
  backward_dx(dy, x, w, r, c, 0, d, dx);
}

#if defined(GPULAB_AVX2_LANES)
template <typename In, typename Out>
__attribute__((target("avx2,fma"))) float forward_row_avx2(const In* x, const float* w, double eps,
                                                           int64_t d, Out* y) {
  const int64_t d8 = d / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < d8; i += 8) {
    const __m256 v = load8(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  const float total = sum8(acc) + sum_of_squares(x, d8, d);
  const float r = 1.0f / std::sqrt(total / static_cast<float>(d) + static_cast<float>(eps));
  const __m256 vr = _mm256_set1_ps(r);
  for (int64_t i = 0; i < d8; i += 8)
    store8(y + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(load8(x + i), vr)));
  normalise(x, w, r, d8, d, y);
  return r;
}

template <typename In, typename Out>
__attribute__((target("avx2,fma"))) void backward_row_avx2(const Out* dy, const In* x,
                                                           const float* w, float r, int64_t d,
                                                           In* dx, float* dw_part) {
  const int64_t d8 = d / 8 * 8;
  const __m256 vr = _mm256_set1_ps(r);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < d8; i += 8) {
    const __m256 n = _mm256_mul_ps(load8(x + i), vr), g = load8(dy + i);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(g, _mm256_loadu_ps(w + i)), n, acc);
    _mm256_storeu_ps(dw_part + i, _mm256_fmadd_ps(g, n, _mm256_loadu_ps(dw_part + i)));
  }
  const float dot = sum8(acc) + backward_dot(dy, x, w, r, d8, d, dw_part);
  const float c = dot / static_cast<float>(d);
  const __m256 vc = _mm256_set1_ps(c);
  for (int64_t i = 0; i < d8; i += 8) {
    const __m256 n = _mm256_mul_ps(load8(x + i), vr);
    const __m256 g = _mm256_mul_ps(load8(dy + i), _mm256_loadu_ps(w + i));
    store8(dx + i, _mm256_mul_ps(vr, _mm256_fnmadd_ps(n, vc, g)));
  }
  backward_dx(dy, x, w, r, c, d8, d, dx);
}
#endif

template <typename In, typename Out>
float forward_row(const In* x, const float* w, double eps, int64_t d, Out* y) {
#if defined(GPULAB_AVX2_LANES)
  if (has_avx2_fma()) return forward_row_avx2(x, w, eps, d, y);
#endif
  return forward_row_scalar(x, w, eps, d, y);
}

template <typename In, typename Out>
void backward_row(const Out* dy, const In* x, const float* w, float r, int64_t d, In* dx,
                  float* dw_part) {
#if defined(GPULAB_AVX2_LANES)
  if (has_avx2_fma()) return backward_row_avx2(dy, x, w, r, d, dx, dw_part);
#endif
  backward_row_scalar(dy, x, w, r, d, dx, dw_part);
}

struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, double eps,
                        int64_t result) {
    const int64_t d = x.size(-1), rows = x.numel() / d;
    auto y = at::empty(x.sizes(), x.options().dtype(static_cast<torch::ScalarType>(result)));
    auto rstd = at::empty({rows}, x.options().dtype(torch::kFloat));
    const float* w = weight.data_ptr<float>();
    float* r = rstd.data_ptr<float>();
    float_or_bf16(x.scalar_type(), [&](auto in_tag) {
      using In = decltype(in_tag);
      float_or_bf16(y.scalar_type(), [&](auto out_tag) {
        using Out = decltype(out_tag);
        const In* xs = x.data_ptr<In>();
        Out* ys = y.data_ptr<Out>();
        for_each_block(rows, [&](int64_t, int64_t first, int64_t count) {
          for (int64_t row = first; row < first + count; ++row)
            r[row] = forward_row(xs + row * d, w, eps, d, ys + row * d);
        });
      });
    });
    ctx->save_for_backward({x, weight, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    const int64_t d = x.size(-1), rows = x.numel() / d, per = block_rows(rows);
    const int64_t blocks = (rows + per - 1) / per;
    auto dy = grads[0].contiguous();
    auto dx = at::empty_like(x);
    std::vector<float> partial(static_cast<size_t>(blocks * d), 0.0f);
    const float *w = weight.data_ptr<float>(), *r = rstd.data_ptr<float>();
    float_or_bf16(x.scalar_type(), [&](auto in_tag) {
      using In = decltype(in_tag);
      float_or_bf16(dy.scalar_type(), [&](auto out_tag) {
        using Out = decltype(out_tag);
        const In* xs = x.data_ptr<In>();
        const Out* dys = dy.data_ptr<Out>();
        In* dxs = dx.data_ptr<In>();
        for_each_block(rows, [&](int64_t block, int64_t first, int64_t count) {
          float* part = partial.data() + block * d;
          for (int64_t row = first; row < first + count; ++row)
            backward_row(dys + row * d, xs + row * d, w, r[row], d, dxs + row * d, part);
        });
      });
    });
    auto dw = at::zeros({d}, weight.options());
    float* dws = dw.data_ptr<float>();
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t i = 0; i < d; ++i) dws[i] += partial[static_cast<size_t>(b * d + i)];
    return {dx, dw, Tensor(), Tensor()};
  }
};

}  // namespace

bool fused_rms_norm_applies(const torch::Tensor& x, const torch::Tensor& weight,
                            torch::ScalarType result) {
  return cpu_kernels_enabled() && x.device().is_cpu() && weight.device().is_cpu() &&
         is_float_or_bf16(x.scalar_type()) && is_float_or_bf16(result) &&
         weight.scalar_type() == torch::kFloat && weight.dim() == 1 && x.dim() >= 1 &&
         x.size(-1) == weight.size(0) && x.numel() > 0;
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                       torch::ScalarType result) {
  TORCH_CHECK(fused_rms_norm_applies(x, weight, result),
              "rms_norm: CPU x (float32 or bfloat16, ..., D), float32 weight (D)");
  return RmsNorm::apply(x.contiguous(), weight.contiguous(), eps, static_cast<int64_t>(result));
}

}  // namespace gpulab::train
