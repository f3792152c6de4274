// Fused SwiGLU gate for float32 and bfloat16 on the CPU (see swiglu.h): each element read and
// written once per pass, arithmetic in float32, the exponential evaluated in AVX2 where the CPU
// has it, chunks split between threads.
#include "train/ops/swiglu.h"

#include <algorithm>
#include <cmath>

#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

// silu(g) * u and its gradients, one element; the vector kernels below compute the same
// expressions eight at a time.
inline float sigmoid(float g) {
  return 1.0f / (1.0f + std::exp(-g));
}

template <typename T>
void forward_scalar(const T* g, const T* u, T* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = static_cast<float>(g[i]);
    h[i] = static_cast<T>(gi * sigmoid(gi) * static_cast<float>(u[i]));
  }
}

template <typename T>
void backward_scalar(const T* dh, const T* g, const T* u, T* dg, T* du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = static_cast<float>(g[i]), d = static_cast<float>(dh[i]);
    const float s = sigmoid(gi);
    du[i] = static_cast<T>(d * (gi * s));
    dg[i] = static_cast<T>(d * static_cast<float>(u[i]) * s * (1.0f + gi * (1.0f - s)));
  }
}

#if defined(GPULAB_AVX2_LANES)
__attribute__((target("avx2,fma"))) inline __m256 sigmoid8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

template <typename T>
__attribute__((target("avx2,fma"))) void forward_avx2(const T* g, const T* u, T* h, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vg = load8(g + i);
    store8(h + i, _mm256_mul_ps(_mm256_mul_ps(vg, sigmoid8(vg)), load8(u + i)));
  }
  forward_scalar(g + i, u + i, h + i, n - i);
}

template <typename T>
__attribute__((target("avx2,fma"))) void backward_avx2(const T* dh, const T* g, const T* u, T* dg,
                                                       T* du, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vg = load8(g + i), vd = load8(dh + i);
    const __m256 s = sigmoid8(vg);
    store8(du + i, _mm256_mul_ps(vd, _mm256_mul_ps(vg, s)));
    const __m256 slope = _mm256_fmadd_ps(vg, _mm256_sub_ps(one, s), one);  // 1 + g (1 - s)
    store8(dg + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(vd, load8(u + i)), s), slope));
  }
  backward_scalar(dh + i, g + i, u + i, dg + i, du + i, n - i);
}

#endif

// Runs fn(begin, count) over [0, n) in one contiguous range per thread (cache-line multiples).
template <typename F>
void split(int64_t n, const F& fn) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n / 4096));
  const int64_t per = (n / chunks + 15) / 16 * 16;
  parallel_chunks(chunks, [&](int64_t c) {
    const int64_t begin = c * per, count = std::min(per, n - begin);
    if (count > 0) fn(begin, count);
  });
}

struct SwiGlu : torch::autograd::Function<SwiGlu> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& gate,
                        const Tensor& up) {
    ctx->save_for_backward({gate, up});
    auto h = at::empty_like(gate);
    float_or_bf16(gate.scalar_type(), [&](auto tag) {
      using scalar_t = decltype(tag);
      const auto *g = gate.data_ptr<scalar_t>(), *u = up.data_ptr<scalar_t>();
      auto* out = h.data_ptr<scalar_t>();
      split(gate.numel(), [&](int64_t b, int64_t n) {
#if defined(GPULAB_AVX2_LANES)
        if (has_avx2_fma()) return forward_avx2(g + b, u + b, out + b, n);
#endif
        forward_scalar(g + b, u + b, out + b, n);
      });
    });
    return h;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    // The incoming gradient in the operands' dtype (autograd may hand another one).
    auto grad = grads[0].to(saved[0].scalar_type()).contiguous();
    auto dgate = at::empty_like(saved[0]), dup = at::empty_like(saved[1]);
    float_or_bf16(grad.scalar_type(), [&](auto tag) {
      using scalar_t = decltype(tag);
      const auto *dh = grad.data_ptr<scalar_t>(), *g = saved[0].data_ptr<scalar_t>(),
                 *u = saved[1].data_ptr<scalar_t>();
      auto *dg = dgate.data_ptr<scalar_t>(), *du = dup.data_ptr<scalar_t>();
      split(grad.numel(), [&](int64_t b, int64_t n) {
#if defined(GPULAB_AVX2_LANES)
        if (has_avx2_fma()) return backward_avx2(dh + b, g + b, u + b, dg + b, du + b, n);
#endif
        backward_scalar(dh + b, g + b, u + b, dg + b, du + b, n);
      });
    });
    return {dgate, dup};
  }
};

}  // namespace

bool fused_swiglu_applies(const torch::Tensor& gate, const torch::Tensor& up) {
  return cpu_kernels_enabled() && gate.device().is_cpu() && is_float_or_bf16(gate.scalar_type()) &&
         up.scalar_type() == gate.scalar_type() && gate.sizes() == up.sizes();
}

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  if (!fused_swiglu_applies(gate, up)) return torch::silu(gate) * up;
  return SwiGlu::apply(gate.contiguous(), up.contiguous());
}

}  // namespace gpulab::train
