// Convolutions that are linear layers taken as such: a 1x1 kernel over channels-last positions
// (each output position's channels are the weight times its input position's channels, so an NHWC
// batch is a [positions, channels] matrix), and an odd kernel centred by zero padding over a 1x1
// map (every tap but the centre reads padding: a product with the centre tap). oneDNN's
// convolution re-lays its weight out in each of its three passes, a cost set by the weight, not
// the batch: at few positions it dominates (the last stages of ResNets at 32 px,
// docs/benchmarks.md).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Output positions (batch x height x width) up to which the product form is taken: measured on a
// 2-core Zen 4 (docs/benchmarks.md, 2026-12-05 session 58), faster from 128 to 2048 positions,
// with oneDNN's matmul on AVX-512 and with MKL's sgemm when both libraries were held to AVX2,
// and behind or even with oneDNN's convolution at some shapes from 6272 up.
inline constexpr int64_t kPointwiseConvMaxRows = 2048;

enum class ProductForm { kNone, kOneByOne, kCentreTap };

// Which product `conv` on x is: kOneByOne for a 1x1 kernel without padding over a 4-D
// channels-last dense x (any stride), kCentreTap for an odd kernel with (k - 1) / 2 zero padding,
// no dilation, over a 1x1 map (any stride); either with one group, 1 to kPointwiseConvMaxRows
// output positions, float32 on the CPU, no autocast and gpulab's kernels on. kNone otherwise.
ProductForm conv_product_form(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// conv(x) as its product where it is one, the module's own forward elsewhere; the product's
// result is channels-last, with gradients for x, weight (0 at taps that read padding) and bias.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

}  // namespace gpulab::train
