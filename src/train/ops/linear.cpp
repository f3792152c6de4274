// fp32 linear layer on oneDNN's sgemm (see linear.h): three products, each written straight
// into a fresh tensor of the layout autograd keeps.
#include "train/ops/linear.h"

#include "train/ops/cpu_kernels.h"
#include "train/ops/sgemm.h"
#include "train/precision.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

struct Fp32Linear : torch::autograd::Function<Fp32Linear> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x, const Tensor& w) {
    const int64_t k = w.size(1), n = w.size(0), m = x.numel() / k;
    ctx->save_for_backward({x, w});
    auto sizes = x.sizes().vec();
    sizes.back() = n;
    auto y = at::empty(sizes, x.options());
    sgemm('N', 'T', m, n, k, x.data_ptr<float>(), k, w.data_ptr<float>(), k, false,
          y.data_ptr<float>(), n);
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w = saved[1];
    const int64_t k = w.size(1), n = w.size(0), m = x.numel() / k;
    auto dy = grads[0].contiguous();
    Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty_like(x);
      sgemm('N', 'N', m, k, n, dy.data_ptr<float>(), n, w.data_ptr<float>(), k, false,
            dx.data_ptr<float>(), k);
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty_like(w);
      sgemm('T', 'N', n, k, m, dy.data_ptr<float>(), n, x.data_ptr<float>(), k, false,
            dw.data_ptr<float>(), k);
    }
    return {dx, dw};
  }
};

}  // namespace

bool fp32_linear_applies(const torch::Tensor& x, const torch::Tensor& w) {
  // Under CPU autocast the product belongs to autocast (bf16), not here.
  return cpu_kernels_enabled() && have_sgemm() &&
         active_autocast(torch::kCPU) == Precision::kFp32 && x.device().is_cpu() &&
         w.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         w.scalar_type() == torch::kFloat && w.dim() == 2 && x.dim() >= 1 &&
         x.size(-1) == w.size(1) && x.numel() > 0;
}

torch::Tensor fp32_linear(const torch::Tensor& x, const torch::Tensor& w) {
  TORCH_CHECK(fp32_linear_applies(x, w), "fp32_linear: fp32 CPU operands, x (..., K), w (N, K)");
  return Fp32Linear::apply(x.contiguous(), w.contiguous());
}

}  // namespace gpulab::train
