// Matrix products under CPU bfloat16 autocast through the fp32 GEMM (see the header for why).
#include "train/models/cpu_bf16_matmul.h"

#include <ATen/Config.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/onednn_linear.h"
#include "train/ops/packed_linear.h"
#include "train/ops/small_rows_linear.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Inside the products the fp32 operands must reach the fp32 GEMM, not be cast back to bf16.
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::DispatchKey::AutocastCPU};
};

torch::Tensor widened(const torch::Tensor& t) {
  return t.to(torch::kFloat);
}
torch::Tensor narrowed(const torch::Tensor& t) {
  return t.to(torch::kBFloat16);
}

// y = x @ w^T with bf16 x (..., in) and w (out, in); gradients in bf16, as a bf16 GEMM gives.
struct Bf16Linear : torch::autograd::Function<Bf16Linear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w) {
    NoAutocast no_autocast;
    ctx->save_for_backward({x, w});
    auto x2 = widened(x.reshape({-1, x.size(-1)}));
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    return narrowed(torch::mm(x2, widened(w).t())).view(sizes);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    NoAutocast no_autocast;
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    auto g2 = widened(grads[0].reshape({-1, w.size(0)}));
    auto gx = narrowed(torch::mm(g2, widened(w))).view(x.sizes());
    auto gw = narrowed(torch::mm(g2.t(), widened(x.reshape({-1, x.size(-1)}))));
    return {gx, gw};
  }
};

// c = a @ b over equal batch dimensions, bf16 in and out.
struct Bf16Matmul : torch::autograd::Function<Bf16Matmul> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    NoAutocast no_autocast;
    ctx->save_for_backward({a, b});
    return narrowed(torch::matmul(widened(a), widened(b)));
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    NoAutocast no_autocast;
    const auto saved = ctx->get_saved_variables();
    auto g = widened(grads[0]);
    auto ga = narrowed(torch::matmul(g, widened(saved[1]).transpose(-2, -1)));
    auto gb = narrowed(torch::matmul(widened(saved[0]).transpose(-2, -1), g));
    return {ga, gb};
  }
};

// Autocast would make these products bf16 and the CPU would run them in its slow loop.
bool takes_fp32_gemm(const torch::Tensor& a, const torch::Tensor& b) {
  static const bool slow = cpu_bf16_gemm_is_slow();
  if (!slow || !cpu_kernels_enabled() || !a.device().is_cpu() ||
      active_autocast(a.device()) != Precision::kBf16)
    return false;
  // Autocast leaves float64 alone; only float32 and bf16 operands are cast.
  auto eligible = [](const torch::Tensor& t) {
    return t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16;
  };
  return eligible(a) && eligible(b);
}

}  // namespace

bool cpu_bf16_gemm_is_slow() {
#if !AT_MKLDNN_ENABLED()
  return true;
#elif defined(GPULAB_AVX2_LANES)
  return !has_avx512_core();
#else
  return false;  // other CPUs: libtorch's own bf16 kernels, unmeasured here
#endif
}

torch::Tensor bf16_linear_on_fp32_gemm(const torch::Tensor& x, const torch::Tensor& w) {
  return Bf16Linear::apply(narrowed(x), narrowed(w));
}

torch::Tensor bf16_matmul_on_fp32_gemm(const torch::Tensor& a, const torch::Tensor& b) {
  return Bf16Matmul::apply(narrowed(a), narrowed(b));
}

torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& w) {
  if (auto y = packed_decode_product(x, w, false); y.defined()) return y;  // a generation's step
  if (small_rows_linear_applies(x, w)) return small_rows_linear(x, w);     // a decode step
  if (takes_fp32_gemm(x, w)) return bf16_linear_on_fp32_gemm(x, w);
  return dense_linear(x, w);
}

torch::Tensor matrix_product(const torch::Tensor& a, const torch::Tensor& b) {
  const bool same_batch = a.dim() == b.dim() && a.dim() >= 2 &&
                          a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2);
  if (!same_batch || !takes_fp32_gemm(a, b)) return torch::matmul(a, b);
  return bf16_matmul_on_fp32_gemm(a, b);
}

}  // namespace gpulab::train
