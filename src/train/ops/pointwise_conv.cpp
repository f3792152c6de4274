// 1x1 convolutions as products over channels-last positions (see pointwise_conv.h).
#include "train/ops/pointwise_conv.h"

#include <variant>

#include "train/ops/onednn_linear.h"

namespace gpulab::train {
namespace {

// What Conv2dImpl keeps (torch::nn::Conv2dOptions is the user-facing subclass).
using ConvOptions = torch::nn::detail::ConvNdOptions<2>;

bool no_padding(const ConvOptions& o) {
  if (std::holds_alternative<torch::enumtype::kValid>(o.padding())) return true;
  const auto* pad = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  return pad != nullptr && (*pad)->at(0) == 0 && (*pad)->at(1) == 0;
}

// The input positions a strided 1x1 kernel reads: every stride-th row and column from the first.
torch::Tensor read_positions(const torch::Tensor& x, const ConvOptions& o) {
  const int64_t sh = o.stride()->at(0), sw = o.stride()->at(1);
  if (sh == 1 && sw == 1) return x;
  return x.slice(2, 0, x.size(2), sh).slice(3, 0, x.size(3), sw);
}

int64_t output_rows(const torch::Tensor& x, const ConvOptions& o) {
  const int64_t sh = o.stride()->at(0), sw = o.stride()->at(1);
  return x.size(0) * ((x.size(2) + sh - 1) / sh) * ((x.size(3) + sw - 1) / sw);
}

}  // namespace

bool pointwise_conv_applies(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  const auto& o = conv.options;
  if (o.kernel_size()->at(0) != 1 || o.kernel_size()->at(1) != 1 || o.groups() != 1 ||
      o.transposed() || !no_padding(o) || x.dim() != 4 || !conv.weight.defined() ||
      x.size(1) != o.in_channels() || !x.is_contiguous(torch::MemoryFormat::ChannelsLast))
    return false;
  const int64_t rows = output_rows(x, o);
  if (rows > kPointwiseConvMaxRows) return false;
  // The same question onednn_linear_applies answers, on the shapes the product would have.
  const auto w2 = conv.weight.view({o.out_channels(), o.in_channels()});
  return onednn_linear_applies(x.as_strided({rows, x.size(1)}, {x.size(1), 1}), w2);
}

torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  if (!pointwise_conv_applies(conv, x)) return conv.forward(x);
  const auto& o = conv.options;
  const auto in = read_positions(x, o).permute({0, 2, 3, 1});  // N H W C, dense unless strided
  const int64_t n = in.size(0), h = in.size(1), w = in.size(2);
  const auto rows = in.reshape({n * h * w, o.in_channels()});
  const auto weight = conv.weight.view({o.out_channels(), o.in_channels()});
  const auto y = dense_linear(rows, weight, o.bias() ? conv.bias : torch::Tensor());
  return y.view({n, h, w, o.out_channels()}).permute({0, 3, 1, 2});
}

}  // namespace gpulab::train
