// One-pass SGD step (see fused_sgd.h). The x86 kernel uses AVX2 fused multiply-adds exactly
// where libtorch's vectorized add kernel does (add with alpha is one fma: other * alpha + self),
// so the update is the one torch.optim.SGD computes, read and written once per element.
#include "train/optim/fused_sgd.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define GPULAB_SGD_X86 1
#endif

#include "train/optim/state_key.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {

namespace {

struct SgdCoeffs {
  float weight_decay, momentum, one_minus_dampening, neg_lr;
  bool decay, has_momentum, first, nesterov;
};

#if defined(GPULAB_SGD_X86)
__attribute__((target("avx2,fma"))) void sgd_kernel(float* p, const float* g, float* buf, int64_t n,
                                                    SgdCoeffs c) {
  const __m256 wd = _mm256_set1_ps(c.weight_decay), mu = _mm256_set1_ps(c.momentum),
               damp = _mm256_set1_ps(c.one_minus_dampening), nlr = _mm256_set1_ps(c.neg_lr);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vp = _mm256_loadu_ps(p + i);
    __m256 vg = _mm256_loadu_ps(g + i);
    if (c.decay) vg = _mm256_fmadd_ps(vp, wd, vg);  // grad.add(p, wd)
    if (c.has_momentum) {
      // buf.mul_(momentum).add_(g, 1 - dampening); a clone of g on the first step
      const __m256 b =
          c.first ? vg : _mm256_fmadd_ps(vg, damp, _mm256_mul_ps(_mm256_loadu_ps(buf + i), mu));
      _mm256_storeu_ps(buf + i, b);
      vg = c.nesterov ? _mm256_fmadd_ps(b, mu, vg) : b;  // g.add(buf, momentum) or buf
    }
    _mm256_storeu_ps(p + i, _mm256_fmadd_ps(vg, nlr, vp));  // p.add_(g, -lr)
  }
  for (; i < n; ++i) {  // the same on the last few elements
    float gi = g[i];
    if (c.decay) gi = std::fma(p[i], c.weight_decay, gi);
    if (c.has_momentum) {
      const float b = c.first ? gi : std::fma(gi, c.one_minus_dampening, buf[i] * c.momentum);
      buf[i] = b;
      gi = c.nesterov ? std::fma(b, c.momentum, gi) : b;
    }
    p[i] = std::fma(gi, c.neg_lr, p[i]);
  }
}

bool cpu_has_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// Two dense tensors of the same sizes whose elements lie in the same order in memory: their
// strides agree wherever a size is above 1 (a 1x1 conv weight's gradient may carry other strides
// over its size-1 dims, as AccumulateGrad's layout contract allows).
bool same_memory_order(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || !a.is_non_overlapping_and_dense() ||
      !b.is_non_overlapping_and_dense())
    return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// The one-pass kernel applies: float32 on the CPU, dense, gradient (and buffer) in the
// parameter's memory order, so that all three are the same flat array.
bool fusable(const torch::Tensor& p, const torch::Tensor& g) {
  return cpu_has_fma() && p.device().is_cpu() && p.scalar_type() == torch::kFloat &&
         g.device().is_cpu() && g.scalar_type() == torch::kFloat && !g.is_sparse() &&
         same_memory_order(g, p);
}
#endif

}  // namespace

torch::Tensor FusedSgd::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  RECORD_FUNCTION("gpulab::FusedSgd::step", std::vector<c10::IValue>());
  fused_params_ = 0;
#if defined(GPULAB_SGD_X86)
  // The fused updates are collected, then run in one parallel pass over all of them: each thread
  // takes its share of every parameter (one hand-off per step, not one per parameter).
  struct Update {
    float* p;
    const float* g;
    float* buf;
    int64_t n;
    SgdCoeffs c;
  };
  std::vector<Update> updates;
  int64_t total = 0;
#endif
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    const double wd = o.weight_decay(), mu = o.momentum(), damp = o.dampening();
    for (auto& p : group.params()) {
      const torch::Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      const StateKey key = state_key(p);
      auto it = state_.find(key);
      torch::optim::SGDParamState* st =
          it == state_.end() ? nullptr
                             : static_cast<torch::optim::SGDParamState*>(it->second.get());
#if defined(GPULAB_SGD_X86)
      if (fusable(p, grad)) {
        const bool first = st == nullptr;
        torch::Tensor buf;
        if (mu != 0) {
          if (first) {
            auto fresh = std::make_unique<torch::optim::SGDParamState>();
            fresh->momentum_buffer(torch::empty_like(p));  // the parameter's layout
            st = fresh.get();
            state_[key] = std::move(fresh);
          } else if (!same_memory_order(st->momentum_buffer(), p)) {
            // A buffer restored in another layout: take the parameter's once.
            st->momentum_buffer(torch::empty_like(p).copy_(st->momentum_buffer()));
          }
          buf = st->momentum_buffer();
        }
        const SgdCoeffs c{static_cast<float>(wd),
                          static_cast<float>(mu),
                          static_cast<float>(1 - damp),
                          static_cast<float>(-1 * o.lr()),
                          wd != 0,
                          mu != 0,
                          first,
                          o.nesterov()};
        updates.push_back({p.data_ptr<float>(), grad.data_ptr<float>(),
                           buf.defined() ? buf.data_ptr<float>() : nullptr, p.numel(), c});
        total += p.numel();
        ++fused_params_;
        continue;
      }
#endif
      // libtorch's own sequence (any device, dtype or layout).
      torch::Tensor d_p = grad;
      if (wd != 0) d_p = d_p.add(p, wd);
      if (mu != 0) {
        torch::Tensor buf;
        if (st == nullptr) {
          buf = torch::clone(d_p).detach();
          auto fresh = std::make_unique<torch::optim::SGDParamState>();
          fresh->momentum_buffer(buf);
          state_[key] = std::move(fresh);
        } else {
          buf = st->momentum_buffer();
          buf.mul_(mu).add_(d_p, 1 - damp);
        }
        d_p = o.nesterov() ? d_p.add(buf, mu) : buf;
      }
      p.add_(d_p, -1 * o.lr());
    }
  }
#if defined(GPULAB_SGD_X86)
  // Memory-bound: a thread per 64 Ki elements at most, so small models stay on one.
  const int64_t chunks = std::clamp<int64_t>(total >> 16, 1, at::get_num_threads());
  parallel_chunks(chunks, [&](int64_t t) {
    for (const Update& u : updates) {
      const int64_t begin = u.n * t / chunks, end = u.n * (t + 1) / chunks;
      sgd_kernel(u.p + begin, u.g + begin, u.buf ? u.buf + begin : nullptr, end - begin, u.c);
    }
  });
#endif
  return loss;
}

}  // namespace gpulab::train
