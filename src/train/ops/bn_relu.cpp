// BatchNorm + (residual) + ReLU (see bn_relu.h): the fused CPU kernel for channels-last float32
// in training, as a custom autograd function, and libtorch's modules and ops everywhere else.
// The input is an [M, C] matrix (M = N*H*W rows, C contiguous channels); every pass splits the
// rows into one chunk per thread, and per-channel sums go through float over a few rows, then
// double per chunk, then double across chunks in a fixed order (same result on every run).
#include "train/ops/bn_relu.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "train/dist/sync_batch_norm.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The kernels work on 8 channels at a time with GCC/Clang vector types: GCC's -O2 cost model
// does not vectorize these loops by itself. In the AVX2 build a vector is one register, in the
// baseline build two.
constexpr int64_t kLanes = 8;
// The reductions walk a block of kBlockRows rows in strips of 16 channels (one 64-byte cache
// line of each row: a strip uses whole lines, so the rows' 4 KiB-multiple strides that map them
// to one cache set cost nothing). A strip's sums stay in registers, in float, then go into
// double totals: float speed, double accuracy. The fused path needs C % 16 == 0 (every ResNet).
constexpr int64_t kStrip = 16;
constexpr int64_t kBlockRows = 16;

// The vectors never cross a non-inlined call (GCC warns that their ABI differs without AVX).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
using Vec = float __attribute__((vector_size(32)));
using Mask = int32_t __attribute__((vector_size(32)));

#define GPULAB_INLINE inline __attribute__((always_inline))

GPULAB_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
GPULAB_INLINE void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}
// v where keep is set (all ones), else +0.
GPULAB_INLINE Vec select(Mask keep, Vec v) {
  return reinterpret_cast<Vec>(keep & reinterpret_cast<Mask>(v));
}
// total[0..8) += v, in double.
GPULAB_INLINE void add_to(double* __restrict total, Vec v) {
  float f[kLanes];
  std::memcpy(f, &v, sizeof v);
  for (int64_t j = 0; j < kLanes; ++j) total[j] += f[j];
}

// Forward statistics of rows [r0, r1): sum and sum of squares of x - shift per channel (the
// shift, one row of x, keeps the variance free of cancellation when |mean| >> std).
GPULAB_INLINE void stats_rows(const float* __restrict x, int64_t channels, int64_t r0, int64_t r1,
                              const float* __restrict shift, double* __restrict sum,
                              double* __restrict sq) {
  for (int64_t r = r0; r < r1; r += kBlockRows) {
    const int64_t end = std::min(r1, r + kBlockRows);
    for (int64_t c = 0; c < channels; c += kStrip) {
      const Vec sa = load(shift + c), sb = load(shift + c + kLanes);
      Vec s0 = {}, s1 = {}, q0 = {}, q1 = {};
      for (int64_t i = r; i < end; ++i) {
        const float* p = x + i * channels + c;
        const Vec d0 = load(p) - sa, d1 = load(p + kLanes) - sb;
        s0 += d0;
        q0 += d0 * d0;
        s1 += d1;
        q1 += d1 * d1;
      }
      add_to(sum + c, s0);
      add_to(sum + c + kLanes, s1);
      add_to(sq + c, q0);
      add_to(sq + c + kLanes, q1);
    }
  }
}

// y = max(0, x*alpha + beta [+ residual]) on rows [r0, r1); NaN passes through as in relu.
template <bool kResidual>
GPULAB_INLINE void apply_rows(const float* __restrict x, const float* __restrict residual,
                              int64_t channels, int64_t r0, int64_t r1,
                              const float* __restrict alpha, const float* __restrict beta,
                              float* __restrict y) {
  const Vec zero = {};
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t o = i * channels;
    for (int64_t c = 0; c < channels; c += kLanes) {
      Vec v = load(x + o + c) * load(alpha + c) + load(beta + c);
      if constexpr (kResidual) v += load(residual + o + c);
      store(y + o + c, select(~(v < zero), v));
    }
  }
}

// Backward reduction on rows [r0, r1): gm = g where y > 0 (else 0) is written out, and sum(gm),
// sum(gm * (x - mean)) per channel.
GPULAB_INLINE void grad_sums_rows(const float* __restrict g, const float* __restrict y,
                                  const float* __restrict x, int64_t channels, int64_t r0,
                                  int64_t r1, const float* __restrict mean, float* __restrict gm,
                                  double* __restrict sum, double* __restrict dot) {
  const Vec zero = {};
  for (int64_t r = r0; r < r1; r += kBlockRows) {
    const int64_t end = std::min(r1, r + kBlockRows);
    for (int64_t c = 0; c < channels; c += kStrip) {
      const Vec mua = load(mean + c), mub = load(mean + c + kLanes);
      Vec s0 = {}, s1 = {}, d0 = {}, d1 = {};
      for (int64_t i = r; i < end; ++i) {
        const int64_t o = i * channels + c;
        const Vec m0 = select(load(y + o) > zero, load(g + o));
        const Vec m1 = select(load(y + o + kLanes) > zero, load(g + o + kLanes));
        store(gm + o, m0);
        store(gm + o + kLanes, m1);
        s0 += m0;
        d0 += m0 * (load(x + o) - mua);
        s1 += m1;
        d1 += m1 * (load(x + o + kLanes) - mub);
      }
      add_to(sum + c, s0);
      add_to(sum + c + kLanes, s1);
      add_to(dot + c, d0);
      add_to(dot + c + kLanes, d1);
    }
  }
}

// grad_x = (gm - (x - mean) * k - gm_mean) * w_invstd on rows [r0, r1), as libtorch's kernel
// writes it. kInPlace: gm is read from grad_x's own buffer (no residual needs it afterwards).
template <bool kInPlace>
GPULAB_INLINE void grad_input_rows(const float* __restrict gm_in, const float* __restrict x,
                                   int64_t channels, int64_t r0, int64_t r1,
                                   const float* __restrict mean, const float* __restrict k,
                                   const float* __restrict gm_mean,
                                   const float* __restrict w_invstd, float* __restrict gx) {
  const float* gm = kInPlace ? gx : gm_in;
  for (int64_t i = r0; i < r1; ++i) {
    const int64_t o = i * channels;
    for (int64_t c = 0; c < channels; c += kLanes) {
      const Vec d = load(x + o + c) - load(mean + c);
      store(gx + o + c,
            (load(gm + o + c) - d * load(k + c) - load(gm_mean + c)) * load(w_invstd + c));
    }
  }
}

// Each kernel compiled twice, for AVX2+FMA and for the baseline, chosen at run time (the build
// targets the baseline x86-64; fused_sgd.cpp does the same).
#if defined(__x86_64__)
bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
template <auto kBody, typename... A>
__attribute__((target("avx2,fma"))) void run_avx2(A... a) {
  kBody(a...);
}
#endif
template <auto kBody, typename... A>
void run_base(A... a) {
  kBody(a...);
}
template <auto kBody, typename... A>
void run(A... a) {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return run_avx2<kBody>(a...);
#endif
  run_base<kBody>(a...);
}

// Splits rows [0, m) into one chunk per intra-op thread: f(chunk, r0, r1). Returns the count.
template <typename F>
int64_t for_chunks(int64_t m, F&& f) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), m / 64));
  parallel_chunks(chunks, [&](int64_t t) { f(t, m * t / chunks, m * (t + 1) / chunks); });
  return chunks;
}

// Per-channel double sums of two quantities over all rows: body(r0, r1, a, b) adds a chunk's
// rows into its own totals; the chunks' totals are then added in chunk order.
template <typename F>
std::pair<std::vector<double>, std::vector<double>> reduce_rows(int64_t m, int64_t channels,
                                                                F&& body) {
  const int64_t most = std::max<int64_t>(1, at::get_num_threads());
  std::vector<double> partial(static_cast<size_t>(most * 2 * channels), 0.0);
  const int64_t chunks = for_chunks(m, [&](int64_t t, int64_t r0, int64_t r1) {
    double* p = partial.data() + t * 2 * channels;
    body(r0, r1, p, p + channels);
  });
  std::vector<double> a(static_cast<size_t>(channels), 0.0), b(a);
  for (int64_t t = 0; t < chunks; ++t)
    for (int64_t c = 0; c < channels; ++c) {
      a[c] += partial[(t * 2) * channels + c];
      b[c] += partial[(t * 2 + 1) * channels + c];
    }
  return {std::move(a), std::move(b)};
}

torch::Tensor channel_vector(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())},
                          torch::kFloat)
      .clone();
}

// Inputs: x, residual (empty: none), weight, bias; running_mean and running_var are
// updated in forward (momentum is the factor BatchNormImplBase::forward computed).
struct BatchNormRelu : public torch::autograd::Function<BatchNormRelu> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor residual,
                               torch::Tensor weight, torch::Tensor bias, torch::Tensor running_mean,
                               torch::Tensor running_var, double momentum, double eps) {
    RECORD_FUNCTION("gpulab::batch_norm_relu", std::vector<c10::IValue>({x}));
    const int64_t channels = x.size(1), m = x.numel() / channels;
    const float* xp = x.data_ptr<float>();

    // Statistics: sums of x - x[0] per channel, in double.
    std::vector<float> shift(xp, xp + channels);
    auto [sum, sq] = reduce_rows(m, channels, [&](int64_t r0, int64_t r1, double* s, double* q) {
      run<stats_rows>(xp, channels, r0, r1, static_cast<const float*>(shift.data()), s, q);
    });
    std::vector<float> mean(channels), invstd(channels), alpha(channels), beta(channels);
    float* rm = running_mean.data_ptr<float>();
    float* rv = running_var.data_ptr<float>();
    const float* w = weight.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    const double n = static_cast<double>(m);
    for (int64_t c = 0; c < channels; ++c) {
      const double d = sum[c] / n;
      const double var = std::max(0.0, sq[c] / n - d * d);  // biased, as BatchNorm normalizes
      const double mu = shift[c] + d, is = 1.0 / std::sqrt(var + eps);
      rm[c] = static_cast<float>(momentum * mu + (1.0 - momentum) * rm[c]);
      rv[c] = static_cast<float>(momentum * var * n / (n - 1.0) + (1.0 - momentum) * rv[c]);
      mean[c] = static_cast<float>(mu);
      invstd[c] = static_cast<float>(is);
      alpha[c] = static_cast<float>(is * w[c]);
      beta[c] = static_cast<float>(b[c] - mu * is * w[c]);
    }

    auto y = at::empty_like(x);
    float* yp = y.data_ptr<float>();
    const float* rp = residual.numel() > 0 ? residual.data_ptr<float>() : nullptr;
    for_chunks(m, [&](int64_t, int64_t r0, int64_t r1) {
      const float *a = alpha.data(), *be = beta.data();
      if (rp)
        run<apply_rows<true>>(xp, rp, channels, r0, r1, a, be, yp);
      else
        run<apply_rows<false>>(xp, rp, channels, r0, r1, a, be, yp);
    });

    // y is also the next convolution's saved input: keeping it here costs no memory.
    ctx->save_for_backward({x, y, weight, channel_vector(mean), channel_vector(invstd)});
    ctx->saved_data["residual"] = rp != nullptr;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("gpulab::batch_norm_relu_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &y = saved[1], &weight = saved[2];
    const bool has_residual = ctx->saved_data["residual"].toBool();
    variable_list out(8);
    if (!grads[0].defined()) return out;
    auto g = grads[0];
    if (!g.is_contiguous(at::MemoryFormat::ChannelsLast))
      g = g.contiguous(at::MemoryFormat::ChannelsLast);
    const int64_t channels = x.size(1), m = x.numel() / channels;
    const float *xp = x.data_ptr<float>(), *yp = y.data_ptr<float>(), *gp = g.data_ptr<float>();
    const float* mean = saved[3].data_ptr<float>();
    const float* invstd = saved[4].data_ptr<float>();

    // The masked gradient goes where it is needed afterwards: the residual's gradient, or
    // grad_x's buffer, which the second pass then overwrites in place.
    auto grad_x = at::empty_like(x);
    auto grad_residual = has_residual ? at::empty_like(x) : torch::Tensor();
    float* gm = has_residual ? grad_residual.data_ptr<float>() : grad_x.data_ptr<float>();
    auto [sum, dot] = reduce_rows(m, channels, [&](int64_t r0, int64_t r1, double* s, double* d) {
      run<grad_sums_rows>(gp, yp, xp, channels, r0, r1, mean, gm, s, d);
    });

    std::vector<float> grad_w(channels), grad_b(channels), k(channels), gm_mean(channels),
        w_invstd(channels);
    const float* w = weight.data_ptr<float>();
    const double n = static_cast<double>(m);
    for (int64_t c = 0; c < channels; ++c) {
      const double is = invstd[c];
      grad_w[c] = static_cast<float>(dot[c] * is);
      grad_b[c] = static_cast<float>(sum[c]);
      k[c] = static_cast<float>(dot[c] * is * is / n);
      gm_mean[c] = static_cast<float>(sum[c] / n);
      w_invstd[c] = static_cast<float>(is * w[c]);
    }
    if (ctx->needs_input_grad(0)) {
      float* gx = grad_x.data_ptr<float>();
      for_chunks(m, [&](int64_t, int64_t r0, int64_t r1) {
        const float *kp = k.data(), *gmm = gm_mean.data(), *wi = w_invstd.data();
        if (has_residual)
          run<grad_input_rows<false>>(static_cast<const float*>(gm), xp, channels, r0, r1, mean, kp,
                                      gmm, wi, gx);
        else
          run<grad_input_rows<true>>(static_cast<const float*>(nullptr), xp, channels, r0, r1, mean,
                                     kp, gmm, wi, gx);
      });
      out[0] = grad_x;
    }
    out[1] = grad_residual;
    out[2] = channel_vector(grad_w);
    out[3] = channel_vector(grad_b);
    return out;
  }
};

// Opt-in (see bn_relu.h for why it is off by default).
bool fused_not_requested() {
  const char* v = std::getenv("GPULAB_BN_RELU_PATH");
  return v == nullptr || std::string_view(v) != "fused";
}

bool cpu_float(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat;
}

}  // namespace

bool batch_norm_relu_fused(const torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                           const torch::Tensor& residual) {
  if (fused_not_requested() || dist::sync_batch_norm_enabled()) return false;
  if (!bn.is_training() || !bn.options.affine() || !bn.options.track_running_stats()) return false;
  if (!cpu_float(bn.weight) || !cpu_float(bn.bias) || !cpu_float(bn.running_mean) ||
      !cpu_float(bn.running_var) || !bn.num_batches_tracked.defined())
    return false;
  if (!cpu_float(x) || x.dim() != 4 || !x.is_contiguous(at::MemoryFormat::ChannelsLast))
    return false;
  const int64_t channels = x.size(1);
  if (channels == 0 || channels % kStrip != 0 || x.numel() / channels < 2 ||
      bn.weight.numel() != channels || bn.bias.numel() != channels ||
      bn.running_mean.numel() != channels || bn.running_var.numel() != channels ||
      !bn.weight.is_contiguous() || !bn.bias.is_contiguous() || !bn.running_mean.is_contiguous() ||
      !bn.running_var.is_contiguous())
    return false;
  if (residual.defined() && (!cpu_float(residual) || residual.sizes() != x.sizes() ||
                             !residual.is_contiguous(at::MemoryFormat::ChannelsLast)))
    return false;
  return true;
}

torch::Tensor batch_norm_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                              const torch::Tensor& residual) {
  if (!batch_norm_relu_fused(bn, x, residual)) {
    // In place, as torchvision's ReLU(inplace=True) and `out += identity`: fewer saved tensors.
    auto y = bn.forward(x);
    if (residual.defined()) y += residual;
    return y.relu_();
  }
  // The running-average factor and the batch count exactly as BatchNormImplBase::forward.
  bn.num_batches_tracked += 1;
  const double momentum = bn.options.momentum().has_value()
                              ? bn.options.momentum().value()
                              : 1.0 / bn.num_batches_tracked.item<double>();
  // An undefined tensor cannot be an autograd input: no residual is an empty one.
  return BatchNormRelu::apply(x, residual.defined() ? residual : at::empty({0}, x.options()),
                              bn.weight, bn.bias, bn.running_mean, bn.running_var, momentum,
                              bn.options.eps());
}

}  // namespace gpulab::train
