// Linear layers under CPU bf16 autocast with a float32 weight gradient (bf16_linear.h).
#include "train/ops/bf16_linear.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include "train/ops/avx2_lanes.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/weight_grad.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct Bf16LinearFloatGrad : torch::autograd::Function<Bf16LinearFloatGrad> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w) {
    // The casts autocast would make, done here so that the weight's gradient skips the narrow one.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
    auto xb = x.to(torch::kBFloat16), wb = w.to(torch::kBFloat16);
    ctx->save_for_backward({xb, wb});
    return at::linear(xb, wb);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
    const auto saved = ctx->get_saved_variables();
    const auto &xb = saved[0], &wb = saved[1];
    const auto g = grads[0].to(torch::kBFloat16);
    torch::Tensor gx, gw;
    // bf16, as autocast's; autograd widens it where x was float32.
    if (ctx->needs_input_grad(0)) gx = at::matmul(g, wb);
    if (ctx->needs_input_grad(1))
      gw = weight_grad(g.reshape({-1, wb.size(0)}), xb.reshape({-1, wb.size(1)}));
    return {gx, gw};
  }
};

}  // namespace

bool bf16_linear_applies(const torch::Tensor& x, const torch::Tensor& w) {
  // Without a weight gradient to make there is nothing to gain, and autocast keeps its bf16 copy
  // of a weight for the whole autocast region (a generation's steps), where this casts per call.
  if (!torch::GradMode::is_enabled() || !w.requires_grad()) return false;
  if (!cpu_kernels_enabled() || !x.device().is_cpu() || !w.device().is_cpu() ||
      active_autocast(x.device()) != Precision::kBf16 || w.scalar_type() != torch::kFloat ||
      w.dim() != 2 || x.dim() < 2 || x.size(-1) != w.size(1) || w.numel() == 0)
    return false;
#if defined(GPULAB_AVX2_LANES)
  return has_avx512_bf16() && is_float_or_bf16(x.scalar_type());
#else
  return false;
#endif
}

torch::Tensor bf16_linear(const torch::Tensor& x, const torch::Tensor& w) {
  return Bf16LinearFloatGrad::apply(x, w);
}

}  // namespace gpulab::train
