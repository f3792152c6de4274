// Decodes JPEG (libturbojpeg) and PNG (libpng) files to uint8 RGB C×H×W tensors. Each codec is
// compiled in when CMake finds it (GPULAB_HAVE_TURBOJPEG, GPULAB_HAVE_PNG).
#pragma once

#include <torch/torch.h>

#include <string_view>

#include "core/result.h"

namespace gpulab::train {

// Decodes an encoded image (format told by its magic bytes) to 3×H×W uint8.
Result<torch::Tensor> decode_image(std::string_view bytes);
// Bilinear resize of a uint8 C×H×W image to C×size×size, as torchvision's Resize on uint8
// tensors (float interpolation, rounded back), writing into `out` (contiguous uint8).
void resize_uint8(const torch::Tensor& image, int64_t size, torch::Tensor out);

bool jpeg_supported();
bool png_supported();

}  // namespace gpulab::train
