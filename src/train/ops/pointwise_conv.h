// 1x1 convolutions over channels-last activations taken as the linear layers they are: each
// output position's channels are the weight times its input position's channels, so an NHWC
// batch is a [positions, channels] matrix and the layer one product each way. oneDNN's
// convolution re-lays its weight out in each of its three passes, a cost set by the weight, not
// the batch: at few positions it dominates (ResNet-50's last stages at 32 px, docs/benchmarks.md).
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

// Output positions (batch x height x width) up to which the product form is taken: measured on a
// 2-core Zen 4 (docs/benchmarks.md, 2026-12-05 session 58), faster or even from 128 to 2048
// positions, and behind oneDNN's convolution at some shapes from 8192 up.
inline constexpr int64_t kPointwiseConvMaxRows = 2048;

// Whether `conv` on x takes the product form: a 1x1 kernel, no padding, one group, x a 4-D
// channels-last dense tensor, at most kPointwiseConvMaxRows output positions, and a product that
// onednn_linear takes (float32 on a CPU with AVX-512, no autocast, gpulab's kernels on).
bool pointwise_conv_applies(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

// conv(x) as the product where pointwise_conv_applies, the module's own forward elsewhere; the
// result is channels-last either way on that path, with gradients for x, weight and bias.
torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x);

}  // namespace gpulab::train
