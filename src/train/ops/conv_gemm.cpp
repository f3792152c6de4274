// Convolutions as sgemm calls on channels-last memory (see conv_gemm.h): the forward, the input
// gradient and the weight gradient each read and write the tensors' own layouts.
#include "train/ops/conv_gemm.h"

#include <algorithm>
#include <vector>

#include "train/ops/sgemm.h"

namespace gpulab::train {

#if !GPULAB_HAVE_DNNL

bool gemm_conv_applies(at::IntArrayRef, at::IntArrayRef, const ConvGeometry&) {
  return false;
}

torch::Tensor gemm_conv2d(const torch::Tensor&, const torch::Tensor&,
                          const c10::optional<torch::Tensor>&, const ConvGeometry&) {
  TORCH_CHECK(false, "gemm_conv2d needs a build with oneDNN (libdnnl-dev)");
}

#else

namespace {

// Sizes of one convolution, with the kernel taps that meet the input when the output is one
// pixel: kernel rows [kh0, kh1) and columns [kw0, kw1) (input row kh - ph, column kw - pw).
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
  int64_t ph = 0, pw = 0;
  int64_t kh0 = 0, kh1 = 0, kw0 = 0, kw1 = 0;
  bool one_by_one() const { return kh == 1 && kw == 1; }
  // For kernel row r of a single-pixel output: where its run of input pixels starts in one
  // sample (x[n][h][w][c]), where its taps start in one weight row (w[o][kh][kw][c]), and the
  // run's length; the strides between samples and weight rows are h*w*c and kh*kw*c.
  int64_t x_run(int64_t r) const { return ((r - ph) * w + (kw0 - pw)) * c; }
  int64_t w_run(int64_t r) const { return (r * kw + kw0) * c; }
  int64_t run_len() const { return (kw1 - kw0) * c; }
};

ConvShape shape_of(at::IntArrayRef xs, at::IntArrayRef ws, const ConvGeometry& g) {
  ConvShape s{xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], 0, 0};
  s.oh = (s.h + 2 * g.padding[0] - s.kh) / g.stride[0] + 1;
  s.ow = (s.w + 2 * g.padding[1] - s.kw) / g.stride[1] + 1;
  s.ph = g.padding[0];
  s.pw = g.padding[1];
  s.kh0 = std::max<int64_t>(0, g.padding[0]);
  s.kh1 = std::min<int64_t>(s.kh, s.h + g.padding[0]);
  s.kw0 = std::max<int64_t>(0, g.padding[1]);
  s.kw1 = std::min<int64_t>(s.kw, s.w + g.padding[1]);
  return s;
}

const float* cptr(const torch::Tensor& t) {
  return t.data_ptr<float>();
}
float* mptr(torch::Tensor& t) {
  return t.data_ptr<float>();
}

const auto kCl = torch::MemoryFormat::ChannelsLast;

// A 1x1 kernel's input at the output pixels: x itself at stride 1, else the strided pixels.
torch::Tensor sampled_input(const torch::Tensor& x, const ConvShape& s, const ConvGeometry& g) {
  if (g.stride[0] == 1 && g.stride[1] == 1) return x;
  return x.slice(2, 0, s.h, g.stride[0]).slice(3, 0, s.w, g.stride[1]).contiguous(kCl);
}

// Memory order (channels-last): x[n][h][w][c], weight[o][kh][kw][c], y[n][oh][ow][o].
torch::Tensor forward_product(const torch::Tensor& x, const torch::Tensor& w, const ConvShape& s,
                              const ConvGeometry& g) {
  auto y = torch::empty({s.n, s.o, s.oh, s.ow}, x.options().memory_format(kCl));
  if (s.one_by_one()) {
    const auto xs = sampled_input(x, s, g);
    sgemm('N', 'T', s.n * s.oh * s.ow, s.o, s.c, cptr(xs), s.c, cptr(w), s.c, false, mptr(y), s.o);
    return y;
  }
  // One output pixel: for each kernel row that meets the input, the taps [kw0, kw1) read one
  // contiguous run of input pixels and one contiguous run of the weight row.
  bool first = true;
  for (int64_t kh = s.kh0; kh < s.kh1 && s.kw0 < s.kw1; ++kh) {
    sgemm('N', 'T', s.n, s.o, s.run_len(), cptr(x) + s.x_run(kh), s.h * s.w * s.c,
          cptr(w) + s.w_run(kh), s.kh * s.kw * s.c, !first, mptr(y), s.o);
    first = false;
  }
  if (first) y.zero_();  // no tap meets the input: only padding is summed
  return y;
}

torch::Tensor input_grad(const torch::Tensor& dy, const torch::Tensor& x, const torch::Tensor& w,
                         const ConvShape& s, const ConvGeometry& g) {
  if (s.one_by_one()) {
    const bool strided = g.stride[0] != 1 || g.stride[1] != 1;
    auto dxs = torch::empty({s.n, s.c, s.oh, s.ow}, x.options().memory_format(kCl));
    sgemm('N', 'N', s.n * s.oh * s.ow, s.c, s.o, cptr(dy), s.o, cptr(w), s.c, false, mptr(dxs),
          s.c);
    if (!strided) return dxs;
    auto dx = torch::zeros_like(x, kCl);
    dx.slice(2, 0, s.h, g.stride[0]).slice(3, 0, s.w, g.stride[1]).copy_(dxs);
    return dx;
  }
  // Each input pixel meets exactly one tap of the single output pixel, or none (left at zero).
  const bool covers_all = s.kh0 - g.padding[0] == 0 && s.kh1 - g.padding[0] == s.h &&
                          s.kw0 - g.padding[1] == 0 && s.kw1 - g.padding[1] == s.w;
  auto dx = covers_all ? torch::empty_like(x, kCl) : torch::zeros_like(x, kCl);
  for (int64_t kh = s.kh0; kh < s.kh1 && s.kw0 < s.kw1; ++kh) {
    sgemm('N', 'N', s.n, s.run_len(), s.o, cptr(dy), s.o, cptr(w) + s.w_run(kh), s.kh * s.kw * s.c,
          false, mptr(dx) + s.x_run(kh), s.h * s.w * s.c);
  }
  return dx;
}

torch::Tensor weight_grad(const torch::Tensor& dy, const torch::Tensor& x, const torch::Tensor& w,
                          const ConvShape& s, const ConvGeometry& g) {
  // Preserve: the gradient has the parameter's exact strides, so AccumulateGrad keeps it as is.
  auto dw = torch::empty_like(w, torch::MemoryFormat::Preserve);
  if (s.one_by_one()) {
    const auto xs = sampled_input(x, s, g);
    sgemm('T', 'N', s.o, s.c, s.n * s.oh * s.ow, cptr(dy), s.o, cptr(xs), s.c, false, mptr(dw),
          s.c);
    return dw;
  }
  const bool all_taps = s.kh0 == 0 && s.kh1 == s.kh && s.kw0 == 0 && s.kw1 == s.kw;
  if (!all_taps) dw.zero_();  // taps that only meet padding get no gradient
  for (int64_t kh = s.kh0; kh < s.kh1 && s.kw0 < s.kw1; ++kh) {
    sgemm('T', 'N', s.o, s.run_len(), s.n, cptr(dy), s.o, cptr(x) + s.x_run(kh), s.h * s.w * s.c,
          false, mptr(dw) + s.w_run(kh), s.kh * s.kw * s.c);
  }
  return dw;
}

class GemmConv2d : public torch::autograd::Function<GemmConv2d> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias, const ConvGeometry& g) {
    save_conv(ctx, x, weight, bias, g);
    auto y = forward_product(x, weight, shape_of(x.sizes(), weight.sizes(), g), g);
    if (bias.has_value()) y.add_(bias->view({1, -1, 1, 1}));
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto c = saved_conv(ctx);
    const auto s = shape_of(c.x.sizes(), c.weight.sizes(), c.g);
    const auto dy = grads[0].contiguous(kCl);
    torch::Tensor dx, db;
    if (c.x_grad) dx = input_grad(dy, c.x, c.weight, s, c.g);
    auto dw = weight_grad(dy, c.x, c.weight, s, c.g);
    if (c.bias_grad) db = dy.sum({0, 2, 3});
    return {dx, dw, db, torch::Tensor()};
  }
};

}  // namespace

bool gemm_conv_applies(at::IntArrayRef x_sizes, at::IntArrayRef w_sizes, const ConvGeometry& g) {
  if (x_sizes.size() != 4 || w_sizes.size() != 4 || g.groups != 1) return false;
  if (g.dilation[0] != 1 || g.dilation[1] != 1 || x_sizes[1] != w_sizes[1]) return false;
  for (auto d : x_sizes)
    if (d <= 0) return false;
  for (auto d : w_sizes)
    if (d <= 0) return false;
  const auto s = shape_of(x_sizes, w_sizes, g);
  if (s.oh <= 0 || s.ow <= 0) return false;
  if (s.one_by_one()) return g.padding[0] == 0 && g.padding[1] == 0;
  return s.oh == 1 && s.ow == 1;
}

torch::Tensor gemm_conv2d(const torch::Tensor& x, const torch::Tensor& weight,
                          const c10::optional<torch::Tensor>& bias, const ConvGeometry& g) {
  TORCH_CHECK(gemm_conv_applies(x.sizes(), weight.sizes(), g),
              "gemm_conv2d called for a convolution it does not compute");
  TORCH_CHECK(x.is_contiguous(kCl) && weight.is_contiguous(kCl),
              "gemm_conv2d needs channels-last x and weight");
  return GemmConv2d::apply(x, weight, bias, g);
}

#endif  // GPULAB_HAVE_DNNL

}  // namespace gpulab::train
