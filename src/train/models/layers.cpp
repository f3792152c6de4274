// Shared model building blocks (see layers.h): torchvision's small ops, expressed in torch::nn.
#include "train/models/layers.h"

#include <charconv>
#include <cmath>

#include "train/ops/pointwise_conv.h"

namespace gpulab::train {

torch::Tensor SeqImpl::forward(torch::Tensor x) {
  for (auto& m : *this) {
    if (auto* conv = m.ptr()->as<torch::nn::Conv2dImpl>())
      x = conv2d_forward(*conv, x);
    else
      x = m.forward(x);
  }
  return x;
}

torch::Tensor apply_activation(Act kind, const torch::Tensor& x) {
  switch (kind) {
    case Act::kNone:
      return x;
    case Act::kReLU:
      return torch::relu(x);
    case Act::kReLU6:
      return torch::clamp(x, 0, 6);
    case Act::kSiLU:
      return torch::silu(x);
    case Act::kHardswish:
      return torch::hardswish(x);
    case Act::kHardsigmoid:
      return torch::hardsigmoid(x);
    case Act::kSigmoid:
      return torch::sigmoid(x);
    case Act::kGELU:
      return torch::gelu(x);
  }
  return x;
}

torch::Tensor ActivationImpl::forward(torch::Tensor x) {
  return apply_activation(kind_, x);
}

torch::nn::Conv2d conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t groups, bool bias, int64_t dilation) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                               .stride(stride)
                               .padding(padding)
                               .groups(groups)
                               .dilation(dilation)
                               .bias(bias));
}

BatchNorm2d batch_norm(int64_t channels, double eps, double momentum) {
  return BatchNorm2d(torch::nn::BatchNormOptions(channels).eps(eps).momentum(momentum));
}

Seq conv_norm_act(const ConvNormActOptions& o) {
  const int64_t padding = o.padding >= 0 ? o.padding : (o.kernel - 1) / 2 * o.dilation;
  Seq seq;
  seq->push_back(conv2d(o.in, o.out, o.kernel, o.stride, padding, o.groups, !o.norm, o.dilation));
  if (o.norm) seq->push_back(batch_norm(o.out, o.bn_eps, o.bn_momentum));
  if (o.act != Act::kNone) seq->push_back(Activation(o.act));
  return seq;
}

Seq conv_bn(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups, Act act,
            const BnSettings& bn) {
  ConvNormActOptions o;
  o.in = in;
  o.out = out;
  o.kernel = kernel;
  o.stride = stride;
  o.groups = groups;
  o.bn_eps = bn.eps;
  o.bn_momentum = bn.momentum;
  o.act = act;
  return conv_norm_act(o);
}

SqueezeExcitationImpl::SqueezeExcitationImpl(int64_t channels, int64_t squeeze_channels, Act act,
                                             Act scale_act)
    : act_(act), scale_act_(scale_act) {
  fc1_ = register_module("fc1", conv2d(channels, squeeze_channels, 1, 1, 0, 1, true));
  fc2_ = register_module("fc2", conv2d(squeeze_channels, channels, 1, 1, 0, 1, true));
}

torch::Tensor SqueezeExcitationImpl::forward(torch::Tensor x) {
  auto scale = torch::adaptive_avg_pool2d(x, {1, 1});
  scale = apply_activation(act_, fc1_->forward(scale));
  scale = apply_activation(scale_act_, fc2_->forward(scale));
  return scale * x;
}

void StochasticDepthImpl::pretty_print(std::ostream& os) const {
  char p[32];
  *std::to_chars(p, p + sizeof(p) - 1, p_).ptr = '\0';  // shortest round-trip, as Python's repr
  os << "StochasticDepth(p=" << p << ", mode=row)";
}

int64_t make_divisible(double v, int64_t divisor) {
  int64_t rounded = static_cast<int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor;
  int64_t new_v = std::max(divisor, rounded);
  if (static_cast<double>(new_v) < 0.9 * v) new_v += divisor;
  return new_v;
}

// Inverse-CDF sampling of a normal restricted to [a, b].
void trunc_normal(torch::Tensor& t, double std, double a, double b) {
  torch::NoGradGuard no_grad;
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = cdf(a / std), hi = cdf(b / std);
  t.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(std * std::sqrt(2.0)).clamp_(a, b);
}

torch::Tensor stochastic_depth(const torch::Tensor& x, double p, bool row_mode, bool training) {
  if (!training || p <= 0.0) return x;
  const double survival = 1.0 - p;
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  if (row_mode) shape[0] = x.size(0);
  auto noise = torch::empty(shape, x.options()).bernoulli_(survival);
  if (survival > 0.0) noise.div_(survival);
  return x * noise;
}

void init_weights(torch::nn::Module& model, ConvInit conv_init, LinearInit linear_init) {
  torch::NoGradGuard no_grad;
  for (auto& m : model.modules(/*include_self=*/false)) {
    if (auto* conv = m->as<torch::nn::Conv2d>()) {
      const torch::nn::init::FanModeType fan = conv_init == ConvInit::kKaimingFanOutRelu
                                                   ? torch::nn::init::FanModeType(torch::kFanOut)
                                                   : torch::nn::init::FanModeType(torch::kFanIn);
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, fan, torch::kReLU);
      if (conv->bias.defined()) conv->bias.zero_();
    } else if (auto* bn = m->as<BatchNorm2d>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
    } else if (auto* linear = m->as<torch::nn::Linear>()) {
      if (linear_init == LinearInit::kKeep) continue;
      if (linear_init == LinearInit::kNormal001) linear->weight.normal_(0.0, 0.01);
      if (linear_init == LinearInit::kUniformFanOut) {
        const double range = 1.0 / std::sqrt(static_cast<double>(linear->weight.size(0)));
        linear->weight.uniform_(-range, range);
      }
      if (linear->bias.defined()) linear->bias.zero_();
    }
  }
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters(/*recurse=*/true)) n += p.numel();
  return n;
}

}  // namespace gpulab::train
