// Convolutions that are plain matrix products on channels-last fp32 CPU memory, computed with
// oneDNN's sgemm straight on the parameter's layout: no blocked weight copy in any pass.
#pragma once

#include <torch/torch.h>

#include "train/ops/conv_geometry.h"

namespace gpulab::train {

// Whether gemm_conv2d computes a convolution of an N x C x H x W input with an O x C x KH x KW
// weight: groups 1, dilation 1, and either a 1x1 kernel without padding (one product over all
// output pixels) or a single output pixel (ResNet's last stage at 32 px: one product per kernel
// row that meets the input). Those are where oneDNN's direct kernels lose most: each pass
// reorders the whole weight into a blocked layout, and a 3x3 weight over a 1x1 map is 9x the
// weight the product reads. Only in builds with oneDNN (GPULAB_HAVE_DNNL); false otherwise.
bool gemm_conv_applies(at::IntArrayRef x_sizes, at::IntArrayRef w_sizes, const ConvGeometry& g);

// The convolution as an autograd function (differentiable once). x and the weight must be fp32
// CPU tensors whose memory is channels-last, and gemm_conv_applies must hold. The output is
// channels-last; the weight gradient has the weight's strides.
torch::Tensor gemm_conv2d(const torch::Tensor& x, const torch::Tensor& weight,
                          const c10::optional<torch::Tensor>& bias, const ConvGeometry& g);

}  // namespace gpulab::train
