// Float32 linear layers through oneDNN's matmul and MKL's sgemm (see onednn_linear.h).
#include "train/ops/onednn_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "train/ops/avx2_lanes.h"
#include "train/ops/bf16_linear.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/weight_grad.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

const c10::OperatorHandle* pointwise_op() {
  static const auto op = c10::Dispatcher::singleton().findOp({"mkldnn::_linear_pointwise", ""});
  return op ? &*op : nullptr;
}

// y = x @ w^T for a 2-D x; the op reads a transposed w in place.
torch::Tensor pointwise(const torch::Tensor& x, const torch::Tensor& w) {
  c10::impl::GenericList no_scalars(c10::OptionalType::create(c10::NumberType::get()));
  torch::jit::Stack stack{x, w, c10::IValue(), "none", std::move(no_scalars), c10::IValue()};
  pointwise_op()->callBoxed(&stack);
  return stack.at(0).toTensor();
}

struct OnednnLinear : torch::autograd::Function<OnednnLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w) {
    auto x2 = x.reshape({-1, x.size(-1)});
    ctx->save_for_backward({x2, w});
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    return pointwise(x2, w).view(sizes);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &w = saved[1];
    auto g2 = grads[0].reshape({-1, w.size(0)});
    torch::Tensor gx, gw;
    if (ctx->needs_input_grad(0)) {
      auto x_sizes = grads[0].sizes().vec();  // x's: the output's with K last
      x_sizes.back() = w.size(1);
      gx = pointwise(g2, w.t()).view(x_sizes);
    }
    if (ctx->needs_input_grad(1))
      gw = weight_grad_applies(g2, x2) ? weight_grad(g2, x2) : torch::mm(g2.t(), x2);
    return {gx, gw};
  }
};

}  // namespace

bool float32_cpu_product(const torch::Tensor& x, const torch::Tensor& w) {
  return cpu_kernels_enabled() && x.scalar_type() == torch::kFloat &&
         w.scalar_type() == torch::kFloat && x.device().is_cpu() && w.device().is_cpu() &&
         active_autocast(x.device()) == Precision::kFp32;
}

bool onednn_linear_applies(const torch::Tensor& x, const torch::Tensor& w) {
#if defined(GPULAB_AVX2_LANES)
  if (!has_avx512_core() || pointwise_op() == nullptr || !float32_cpu_product(x, w) ||
      w.dim() != 2 || x.dim() < 2)
    return false;
  const int64_t k = w.size(1);
  return k > 0 && w.size(0) > 0 && x.size(-1) == k && x.numel() / k >= kOnednnMinRows;
#else
  return false;
#endif
}

torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& w) {
  return OnednnLinear::apply(x, w);
}

torch::Tensor dense_linear(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& bias) {
  // The bias as F.linear's addmm adds it, after the product (an autograd Function's inputs must
  // all be defined tensors, and most of these layers have none).
  if (onednn_linear_applies(x, w))
    return bias.defined() ? onednn_linear(x, w) + bias : onednn_linear(x, w);
  if (!bias.defined() && bf16_linear_applies(x, w)) return bf16_linear(x, w);
  return torch::nn::functional::linear(x, w, bias);
}

}  // namespace gpulab::train
