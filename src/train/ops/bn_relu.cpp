// BatchNorm + (residual) + ReLU (see bn_relu.h).
#include "train/ops/bn_relu.h"

namespace gpulab::train {

torch::Tensor batch_norm_relu(torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& x,
                              const torch::Tensor& residual) {
  // In place, as torchvision's ReLU(inplace=True) and `out += identity`: fewer saved tensors.
  auto y = bn.forward(x);
  if (residual.defined()) y += residual;
  return y.relu_();
}

}  // namespace gpulab::train
