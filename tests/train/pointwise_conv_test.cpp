// Convolutions as products (train/ops/pointwise_conv.h), 1x1 kernels and centred kernels over 1x1
// maps: output and every gradient equal float64's within float32 rounding, strided and with a
// bias; taken only where they apply; and a ResNet-50 forward and backward through them as close
// to float64 as libtorch's own float32 convolutions are.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "float_rounding.h"
#include "train/memory_format.h"
#include "train/models/registry.h"
#include "train/ops/cpu_kernels.h"
#include "train/ops/pointwise_conv.h"
#include "train/precision.h"

using namespace gpulab::train;

namespace {

torch::nn::Conv2d one_by_one(int64_t in, int64_t out, int64_t stride = 1, bool bias = false) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(bias));
}

bool is_product(const torch::nn::Conv2dImpl& conv, const torch::Tensor& x) {
  return conv_product_form(conv, x) != ProductForm::kNone;
}

torch::Tensor nhwc(torch::Tensor t) {
  return t.contiguous(torch::MemoryFormat::ChannelsLast);
}

// [N, C, H, W] as the [positions, C] matrix the product reads.
torch::Tensor position_rows(const torch::Tensor& t) {
  return t.permute({0, 2, 3, 1}).reshape({-1, t.size(1)});
}

// conv2d_forward against float64 arithmetic on the same values: the output and the weight's and
// input's gradients within the product's rounding bound; input positions a stride skips get 0.
void expect_conv_matches_float64(int64_t n, int64_t c, int64_t hw, int64_t out, int64_t stride,
                                 bool bias) {
  auto conv = one_by_one(c, out, stride, bias);
  conv->weight.set_data(nhwc(conv->weight.detach()));
  auto x = nhwc(torch::randn({n, c, hw, hw})).requires_grad_(true);
  ASSERT_EQ(conv_product_form(*conv, x), ProductForm::kOneByOne) << n << "x" << c << "x" << hw;
  auto y = conv2d_forward(*conv, x);
  EXPECT_TRUE(y.is_contiguous(torch::MemoryFormat::ChannelsLast));
  const auto g = torch::randn_like(y);
  y.backward(g);
  const auto read = x.detach().slice(2, 0, hw, stride).slice(3, 0, hw, stride);
  const auto x2 = position_rows(read), g2 = position_rows(g),
             w2 = conv->weight.detach().view({out, c});
  auto y2 = position_rows(y.detach());
  if (bias) y2 = y2 - conv->bias.detach();
  expect_within_rounding(y2, x2, w2);
  expect_within_rounding(conv->weight.grad().view({out, c}), g2.t(), x2.t());
  const auto gx = x.grad();
  expect_within_rounding(position_rows(gx.slice(2, 0, hw, stride).slice(3, 0, hw, stride)), g2,
                         w2.t());
  if (stride > 1) {
    auto skipped = gx.clone();
    skipped.slice(2, 0, hw, stride).slice(3, 0, hw, stride).zero_();
    EXPECT_EQ(skipped.abs().max().item<float>(), 0.0f);
  }
  if (bias) {
    EXPECT_TRUE(torch::allclose(conv->bias.grad().to(torch::kDouble), g2.to(torch::kDouble).sum(0),
                                1e-4, 1e-4));
  }
}

// A k x k convolution centred by zero padding over 1x1 maps: the product with its centre tap,
// within rounding; the other taps' gradient exactly 0.
void expect_centre_tap_matches_float64(int64_t n, int64_t c, int64_t k, int64_t out, int64_t stride,
                                       bool bias) {
  auto conv = torch::nn::Conv2d(
      torch::nn::Conv2dOptions(c, out, k).padding(k / 2).stride(stride).bias(bias));
  conv->weight.set_data(nhwc(conv->weight.detach()));
  auto x = nhwc(torch::randn({n, c, 1, 1})).requires_grad_(true);
  ASSERT_EQ(conv_product_form(*conv, x), ProductForm::kCentreTap) << k << "x" << k;
  auto y = conv2d_forward(*conv, x);
  ASSERT_EQ(y.sizes(), conv->forward(x.detach()).sizes());
  const auto g = torch::randn_like(y);
  y.backward(g);
  const auto x2 = x.detach().view({n, c}), g2 = g.view({n, out});
  const auto centre = conv->weight.detach().select(3, k / 2).select(2, k / 2);
  auto y2 = y.detach().view({n, out});
  if (bias) y2 = y2 - conv->bias.detach();
  expect_within_rounding(y2, x2, centre);
  expect_within_rounding(x.grad().view({n, c}), g2, centre.t());
  auto gw = conv->weight.grad().clone();
  expect_within_rounding(gw.select(3, k / 2).select(2, k / 2), g2.t(), x2.t());
  gw.select(3, k / 2).select(2, k / 2).zero_();
  EXPECT_EQ(gw.abs().max().item<float>(), 0.0f) << "a tap that reads padding";
}

}  // namespace

TEST(PointwiseConv, ACentredKernelOverOnePositionIsItsCentreTap) {
  torch::manual_seed(9);
  expect_centre_tap_matches_float64(128, 512, 3, 512, 1, false);  // ResNet's last stage at 32 px
  expect_centre_tap_matches_float64(16, 40, 3, 24, 2, true);      // strided, a bias
  expect_centre_tap_matches_float64(20, 8, 5, 12, 1, false);      // 5x5
  // The libtorch convolution on the same values agrees (a check of the premise, not the bound).
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 16, 3).padding(1));
  const auto x = torch::randn({64, 32, 1, 1});
  EXPECT_TRUE(torch::allclose(conv2d_forward(*conv, x), conv->forward(x), 1e-5, 1e-5));
}

TEST(PointwiseConv, OutputAndGradientsEqualFloat64WithinRounding) {
  torch::manual_seed(5);
  expect_conv_matches_float64(128, 64, 2, 96, 1, false);  // 512 positions
  expect_conv_matches_float64(16, 256, 1, 64, 1, false);  // one position per image
  expect_conv_matches_float64(8, 48, 7, 200, 1, true);    // odd sizes, a bias
  expect_conv_matches_float64(8, 32, 8, 64, 2, false);    // strided: every other row and column
  expect_conv_matches_float64(4, 24, 5, 40, 2, true);     // strided over an odd size
  expect_conv_matches_float64(32, 16, 8, 16, 1, false);   // exactly kPointwiseConvMaxRows
  expect_conv_matches_float64(2, 24, 2, 16, 1, false);    // 8 rows: libtorch's linear (MKL)
}

TEST(PointwiseConv, TakesOnlyConvolutionsThatAreProductsOverFewPositions) {
  auto conv = one_by_one(16, 32);
  const auto x = nhwc(torch::randn({8, 16, 4, 4}));
  EXPECT_TRUE(is_product(*conv, x));
  EXPECT_FALSE(is_product(*conv, torch::randn({8, 16, 4, 4}))) << "NCHW";
  EXPECT_TRUE(is_product(*conv, nhwc(torch::randn({1, 16, 2, 2})))) << "4 positions";
  EXPECT_FALSE(is_product(*conv, nhwc(torch::randn({0, 16, 2, 2})))) << "no positions";
  const int64_t side = 8;  // 2048 positions at 32 images, one more image above the cap
  EXPECT_TRUE(is_product(*conv, nhwc(torch::randn({32, 16, side, side}))));
  EXPECT_FALSE(is_product(*conv, nhwc(torch::randn({33, 16, side, side}))));
  EXPECT_FALSE(is_product(*conv, x.to(torch::kDouble)));
  auto k3 = torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1));
  EXPECT_FALSE(is_product(*k3, x)) << "3x3";
  auto padded = torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 1).padding(1));
  EXPECT_FALSE(is_product(*padded, x)) << "padding";
  auto grouped = torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 1).groups(2));
  EXPECT_FALSE(is_product(*grouped, x)) << "groups";
  // A centred kernel is a product over 1x1 maps only, with zero padding and no dilation.
  const auto one = nhwc(torch::randn({32, 16, 1, 1}));
  EXPECT_EQ(conv_product_form(*k3, one), ProductForm::kCentreTap);
  EXPECT_EQ(conv_product_form(*k3, nhwc(torch::randn({32, 16, 2, 2}))), ProductForm::kNone);
  auto reflect = torch::nn::Conv2d(
      torch::nn::Conv2dOptions(16, 32, 3).padding(1).padding_mode(torch::kReflect));
  EXPECT_EQ(conv_product_form(*reflect, one), ProductForm::kNone) << "reflect padding";
  auto dilated = torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(2).dilation(2));
  EXPECT_EQ(conv_product_form(*dilated, one), ProductForm::kNone) << "dilation";
  auto uncentred = torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(2));
  EXPECT_EQ(conv_product_form(*uncentred, one), ProductForm::kNone) << "padding 2";
  {
    AutocastGuard bf16(Precision::kBf16, torch::kCPU);
    EXPECT_FALSE(is_product(*conv, x)) << "autocast's product is a bf16 one";
  }
  set_cpu_kernels(false);
  EXPECT_FALSE(is_product(*conv, x));
  set_cpu_kernels(true);
  // Where it does not apply, the module's own forward runs: the same values as conv->forward.
  const auto nchw = torch::randn({2, 16, 3, 3});
  EXPECT_TRUE(torch::equal(conv2d_forward(*conv, nchw), conv->forward(nchw)));
}

namespace {

// Largest output or gradient difference of a ResNet-50 forward and backward (channels-last,
// float32) from the same in float64, each as a norm relative to the float64 tensor's. In eval
// mode: train-mode BatchNorm over the last stage's 16 positions amplifies float32 rounding into
// 4-5 % gradient differences (either convolution path), which would hide a product's error; the
// convolutions run the same either way. The loss weighs each logit by a fixed random number, so
// every logit sends a gradient back.
double resnet50_step_error(const std::vector<torch::Tensor>& weights, const torch::Tensor& x,
                           const torch::Tensor& weights_of_logits,
                           const std::vector<torch::Tensor>& grads64, const torch::Tensor& y64) {
  ModelOptions o;
  o.num_classes = 10;
  auto model = create_model("resnet50", o);
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) params[i].set_data(weights[i].to(torch::kFloat));
  make_channels_last(*model);
  model->eval();
  auto y = model->forward(nhwc(x.to(torch::kFloat)));
  (y * weights_of_logits.to(torch::kFloat)).sum().backward();
  auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a.to(torch::kDouble) - b).norm() / b.norm().clamp_min(1e-12)).item<double>();
  };
  double worst = rel(y.detach(), y64);
  for (size_t i = 0; i < params.size(); ++i)
    worst = std::max(worst, rel(params[i].grad(), grads64[i]));
  return worst;
}

}  // namespace

TEST(PointwiseConv, AResNet50PassIsAsCloseToFloat64AsLibtorchsConvolutions) {
  torch::manual_seed(7);
  ModelOptions o;
  o.num_classes = 10;
  auto ref = create_model("resnet50", o);
  for (auto& p : ref->parameters()) p.set_data(p.data().to(torch::kDouble));
  for (auto& b : ref->buffers())
    if (b.is_floating_point()) b.set_data(b.data().to(torch::kDouble));
  // 16 images of 32 px: the last stage's 1x1 convolutions see 16 positions, the third's 64, and
  // the last stage's 3x3 ones after its first block a 1x1 map (the centre tap).
  const auto x = torch::randn({16, 3, 32, 32}, torch::kDouble);
  const auto weights_of_logits = torch::randn({16, 10}, torch::kDouble);
  ref->eval();
  const auto y64 = ref->forward(x);
  (y64 * weights_of_logits).sum().backward();
  std::vector<torch::Tensor> weights, grads64;
  for (auto& p : ref->parameters()) {
    weights.push_back(p.detach());
    grads64.push_back(p.grad());
  }
  const double with_products =
      resnet50_step_error(weights, x, weights_of_logits, grads64, y64.detach());
  set_cpu_kernels(false);
  const double libtorch_only =
      resnet50_step_error(weights, x, weights_of_logits, grads64, y64.detach());
  set_cpu_kernels(true);
  std::printf(
      "[pointwise-conv] resnet50 fp32 forward+backward vs fp64: products %.3g, libtorch's %.3g\n",
      with_products, libtorch_only);
  EXPECT_LT(with_products, 1e-4);
  EXPECT_LT(with_products, 2 * libtorch_only);
}
