// Fused SwiGLU gate for float32 on the CPU (see swiglu.h): each element read and written once per
// pass, the exponential evaluated in AVX2 where the CPU has it, chunks split between threads.
#include "train/ops/swiglu.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#define GPULAB_SWIGLU_X86 1
#endif

#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

// silu(g) * u and its gradients, one element; the vector kernels below compute the same
// expressions eight at a time.
inline float sigmoid(float g) {
  return 1.0f / (1.0f + std::exp(-g));
}

void forward_scalar(const float* g, const float* u, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] * sigmoid(g[i]) * u[i];
}

void backward_scalar(const float* dh, const float* g, const float* u, float* dg, float* du,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(g[i]);
    du[i] = dh[i] * (g[i] * s);
    dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
  }
}

#if defined(GPULAB_SWIGLU_X86)
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

__attribute__((target("avx2,fma"))) inline __m256 sigmoid8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

__attribute__((target("avx2,fma"))) void forward_avx2(const float* g, const float* u, float* h,
                                                      int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vg = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_mul_ps(vg, sigmoid8(vg)), _mm256_loadu_ps(u + i)));
  }
  forward_scalar(g + i, u + i, h + i, n - i);
}

__attribute__((target("avx2,fma"))) void backward_avx2(const float* dh, const float* g,
                                                       const float* u, float* dg, float* du,
                                                       int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vg = _mm256_loadu_ps(g + i), vd = _mm256_loadu_ps(dh + i);
    const __m256 s = sigmoid8(vg);
    _mm256_storeu_ps(du + i, _mm256_mul_ps(vd, _mm256_mul_ps(vg, s)));
    const __m256 slope = _mm256_fmadd_ps(vg, _mm256_sub_ps(one, s), one);  // 1 + g (1 - s)
    _mm256_storeu_ps(
        dg + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(vd, _mm256_loadu_ps(u + i)), s), slope));
  }
  backward_scalar(dh + i, g + i, u + i, dg + i, du + i, n - i);
}

bool has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
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
    const float *g = gate.data_ptr<float>(), *u = up.data_ptr<float>();
    float* out = h.data_ptr<float>();
    split(gate.numel(), [&](int64_t b, int64_t n) {
#if defined(GPULAB_SWIGLU_X86)
      if (has_avx2()) return forward_avx2(g + b, u + b, out + b, n);
#endif
      forward_scalar(g + b, u + b, out + b, n);
    });
    return h;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto grad = grads[0].contiguous();
    auto dgate = at::empty_like(saved[0]), dup = at::empty_like(saved[1]);
    const float *dh = grad.data_ptr<float>(), *g = saved[0].data_ptr<float>(),
                *u = saved[1].data_ptr<float>();
    float *dg = dgate.data_ptr<float>(), *du = dup.data_ptr<float>();
    split(grad.numel(), [&](int64_t b, int64_t n) {
#if defined(GPULAB_SWIGLU_X86)
      if (has_avx2()) return backward_avx2(dh + b, g + b, u + b, dg + b, du + b, n);
#endif
      backward_scalar(dh + b, g + b, u + b, dg + b, du + b, n);
    });
    return {dgate, dup};
  }
};

}  // namespace

bool fused_swiglu_applies(const torch::Tensor& gate, const torch::Tensor& up) {
  return gate.device().is_cpu() && gate.scalar_type() == torch::kFloat &&
         up.scalar_type() == torch::kFloat && gate.sizes() == up.sizes();
}

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  if (!fused_swiglu_applies(gate, up)) return torch::silu(gate) * up;
  return SwiGlu::apply(gate.contiguous(), up.contiguous());
}

}  // namespace gpulab::train
