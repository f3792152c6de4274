// Building blocks shared by the model families: torchvision's Conv2dNormActivation (a Sequential
// "0" conv, "1" norm, "2" activation), SqueezeExcitation, stochastic depth, weight init helpers.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "train/models/batch_norm.h"

namespace gpulab::train {

// The activations the zoo uses. A module (not a function) so it can sit in a Sequential at the
// index torchvision gives it; it has no parameters, so it adds no names to the state dict.
enum class Act { kNone, kReLU, kReLU6, kSiLU, kHardswish, kHardsigmoid, kSigmoid, kGELU };

class ActivationImpl : public torch::nn::Module {
 public:
  explicit ActivationImpl(Act kind = Act::kReLU) : kind_(kind) {}
  torch::Tensor forward(torch::Tensor x);
  Act kind() const { return kind_; }

 private:
  Act kind_;
};
TORCH_MODULE(Activation);

torch::Tensor apply_activation(Act kind, const torch::Tensor& x);

// A Sequential that can itself sit inside a Sequential (torch::nn::Sequential's templated
// forward cannot): use it for every nested container, e.g. features.0 = Conv2dNormActivation.
// Its 2-D convolutions run through conv2d_forward (train/ops/pointwise_conv.h).
class SeqImpl : public torch::nn::SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Seq);

// torchvision.ops.Conv2dNormActivation: conv (bias only without norm), BatchNorm2d, activation.
struct ConvNormActOptions {
  int64_t in = 0;
  int64_t out = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = -1;  // < 0: (kernel - 1) / 2 * dilation, as torchvision
  int64_t groups = 1;
  int64_t dilation = 1;
  bool norm = true;
  double bn_eps = 1e-5;
  double bn_momentum = 0.1;
  Act act = Act::kReLU;
};

// Children "0" (Conv2d), "1" (BatchNorm2d, if norm) and "2" (activation, if any), like torchvision.
Seq conv_norm_act(const ConvNormActOptions& o);

// BatchNorm settings of a family (EfficientNet and MobileNet differ from the defaults).
struct BnSettings {
  double eps = 1e-5;
  double momentum = 0.1;
};

// conv_norm_act with BatchNorm `bn` and activation `act` (padding as torchvision, no dilation).
Seq conv_bn(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups, Act act,
            const BnSettings& bn);

torch::nn::Conv2d conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                         int64_t padding = 0, int64_t groups = 1, bool bias = false,
                         int64_t dilation = 1);
BatchNorm2d batch_norm(int64_t channels, double eps = 1e-5, double momentum = 0.1);

// torchvision.ops.SqueezeExcitation: avgpool, fc1 (1x1 conv), activation, fc2, scale_activation.
class SqueezeExcitationImpl : public torch::nn::Module {
 public:
  SqueezeExcitationImpl(int64_t channels, int64_t squeeze_channels, Act act = Act::kReLU,
                        Act scale_act = Act::kSigmoid);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d fc1_{nullptr}, fc2_{nullptr};
  Act act_, scale_act_;
};
TORCH_MODULE(SqueezeExcitation);

// torchvision.ops.stochastic_depth: drops whole residual branches ("row": per sample, "batch":
// all at once) with probability p in training, scaling survivors by 1 / (1 - p).
torch::Tensor stochastic_depth(const torch::Tensor& x, double p, bool row_mode, bool training);

// torchvision.ops.StochasticDepth, "row" mode, as a child module (named like torchvision's, so
// printouts show its p).
class StochasticDepthImpl : public torch::nn::Module {
 public:
  explicit StochasticDepthImpl(double p) : p_(p) {}
  torch::Tensor forward(torch::Tensor x) {
    return stochastic_depth(x, p_, /*row_mode=*/true, is_training());
  }
  void pretty_print(std::ostream& os) const override;

 private:
  double p_;
};
TORCH_MODULE(StochasticDepth);

// torchvision's _make_divisible: round to the nearest multiple of 8, never losing more than 10%.
int64_t make_divisible(double v, int64_t divisor = 8);

// torch.nn.init.trunc_normal_ (bounds a, b are absolute values, as in PyTorch).
void trunc_normal(torch::Tensor& t, double std, double a = -2.0, double b = 2.0);

// torchvision's usual initialisation, stated per family: Kaiming-normal convolutions (ReLU gain,
// fan in or out) with zero biases, unit BatchNorm, and the family's rule for Linear layers.
enum class ConvInit { kKaimingFanOutRelu, kKaimingFanInRelu };
enum class LinearInit {
  kKeep,           // libtorch's default (ResNet)
  kZeroBias,       // default weight, zero bias (DenseNet)
  kNormal001,      // N(0, 0.01) weight, zero bias (VGG, MobileNet)
  kUniformFanOut,  // U(+-1/sqrt(out features)) weight, zero bias (EfficientNet)
};
void init_weights(torch::nn::Module& model, ConvInit conv, LinearInit linear);

// All parameters (not buffers) of a module, as torchvision counts them.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace gpulab::train
