// Convolutions that are products over channels-last positions (see pointwise_conv.h).
#include "train/ops/pointwise_conv.h"

#include <array>
#include <variant>

#include "train/ops/onednn_linear.h"

namespace gpulab::train {
namespace {

// What Conv2dImpl keeps (torch::nn::Conv2dOptions is the user-facing subclass).
using ConvOptions = torch::nn::detail::ConvNdOptions<2>;

// The padding as two numbers; -1 for 'same' (its amounts depend on the kernel only, but it is
// never the form these products need to recognise).
std::array<int64_t, 2> padding_of(const ConvOptions& o) {
  if (std::holds_alternative<torch::enumtype::kValid>(o.padding())) return {0, 0};
  const auto* pad = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  if (pad == nullptr) return {-1, -1};
  return {(*pad)->at(0), (*pad)->at(1)};
}

ProductForm form_of(const ConvOptions& o, const torch::Tensor& x) {
  const int64_t kh = o.kernel_size()->at(0), kw = o.kernel_size()->at(1);
  const auto pad = padding_of(o);
  if (kh == 1 && kw == 1 && pad[0] == 0 && pad[1] == 0)
    return x.is_contiguous(torch::MemoryFormat::ChannelsLast) ? ProductForm::kOneByOne
                                                              : ProductForm::kNone;
  // An odd kernel centred by zero padding over a 1x1 map: every other tap reads padding.
  const bool centred = kh % 2 == 1 && kw % 2 == 1 && pad[0] == kh / 2 && pad[1] == kw / 2 &&
                       o.dilation()->at(0) == 1 && o.dilation()->at(1) == 1 &&
                       std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
  return centred && x.size(2) == 1 && x.size(3) == 1 ? ProductForm::kCentreTap : ProductForm::kNone;
}

// The input positions a 1x1 kernel reads: every stride-th row and column from the first.
torch::Tensor read_positions(const torch::Tensor& x, const ConvOptions& o) {
  const int64_t sh = o.stride()->at(0), sw = o.stride()->at(1);
  if (sh == 1 && sw == 1) return x;
  return x.slice(2, 0, x.size(2), sh).slice(3, 0, x.size(3), sw);
}

int64_t output_rows(const torch::Tensor& x, const ConvOptions& o) {
  const int64_t sh = o.stride()->at(0), sw = o.stride()->at(1);
  return x.size(0) * ((x.size(2) + sh - 1) / sh) * ((x.size(3) + sw - 1) / sw);
}

// The [out, in] matrix the product multiplies by: the whole 1x1 weight, or the centre tap.
torch::Tensor product_weight(const torch::nn::Conv2dImpl& conv, ProductForm form) {
  const auto& w = conv.weight;
  if (form == ProductForm::kOneByOne) return w.view({w.size(0), w.size(1)});
  // A copy: oneDNN's matmul read the strided tap over 100x slower than a dense one (measured).
  return w.select(3, w.size(3) / 2).select(2, w.size(2) / 2).contiguous();
}

}  // namespace

ProductForm conv_product_form(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  const auto& o = conv.options;
  if (o.groups() != 1 || o.transposed() || x.dim() != 4 || !conv.weight.defined() ||
      x.size(1) != o.in_channels())
    return ProductForm::kNone;
  const ProductForm form = form_of(o, x);
  if (form == ProductForm::kNone) return form;
  const int64_t rows = form == ProductForm::kOneByOne ? output_rows(x, o) : x.size(0);
  if (rows < 1 || rows > kPointwiseConvMaxRows) return ProductForm::kNone;
  // dense_linear's products: oneDNN's matmul on AVX-512, libtorch's linear (MKL) elsewhere; both
  // beat the convolution at few positions (docs/benchmarks.md, session 58).
  return float32_cpu_product(x, conv.weight) ? form : ProductForm::kNone;
}

torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  const ProductForm form = conv_product_form(conv, x);
  if (form == ProductForm::kNone) return conv.forward(x);
  const auto& o = conv.options;
  // N H W C, dense unless strided (the centre tap's map is 1x1, its stride reads one position).
  const auto in = (form == ProductForm::kOneByOne ? read_positions(x, o) : x).permute({0, 2, 3, 1});
  const int64_t n = in.size(0), h = in.size(1), w = in.size(2);
  const auto rows = in.reshape({n * h * w, o.in_channels()});
  const auto y =
      dense_linear(rows, product_weight(conv, form), o.bias() ? conv.bias : torch::Tensor());
  return y.view({n, h, w, o.out_channels()}).permute({0, 3, 1, 2});
}

}  // namespace gpulab::train
