// Convolution forward for the model families (see conv.h).
#include "train/ops/conv.h"

namespace gpulab::train {

torch::Tensor conv2d_forward(torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  return conv.forward(x);
}

}  // namespace gpulab::train
