// conv2d_forward's oneDNN paths (train/ops/conv.cpp, train/ops/conv_gemm.cpp) against libtorch's
// own Conv2d: the same output, grad_input, grad_weight and grad_bias in contiguous and
// channels-last layout, at 1 and 2 threads, with the weight gradient in channels-last; the cases
// that take the sgemm path and those that must keep the plain path.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/tensor_diff.h"
#include "train/memory_format.h"
#include "train/models/registry.h"
#include "train/ops/conv.h"

namespace gpulab::train {
namespace {

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, o;
  std::array<int64_t, 2> k, stride, padding;
  int64_t dilation, groups;
  bool bias, x_grad;
  bool gemm;  // conv_gemm.cpp computes it (a 1x1 kernel without padding, or one output pixel)
};

// ResNet's convs (3x3 stride 1/2, 1x1 stride 1/2, the 7x7 stem whose input needs no grad), an odd
// size whose right padding differs from the left, bias, groups, dilation; and the single output
// pixel cases: a 1x1 map (its x's strides read as NCHW; the weight makes libtorch take
// channels-last), ResNet-50's 2x2 -> 1x1 stride-2 conv, input rows and kernel taps that meet no
// output (zero gradients), a non-square kernel.
const std::vector<ConvCase> kCases = {
    {"3x3s1p1", 4, 16, 10, 10, 32, {3, 3}, {1, 1}, {1, 1}, 1, 1, false, true, false},
    {"3x3s2p1_odd_bias", 3, 8, 9, 9, 16, {3, 3}, {2, 2}, {1, 1}, 1, 1, true, true, false},
    {"1x1s2", 4, 16, 8, 8, 32, {1, 1}, {2, 2}, {0, 0}, 1, 1, false, true, true},
    {"1x1s1_bias", 3, 24, 5, 7, 40, {1, 1}, {1, 1}, {0, 0}, 1, 1, true, true, true},
    {"1x1s2_odd", 2, 8, 7, 5, 16, {1, 1}, {2, 2}, {0, 0}, 1, 1, false, true, true},
    {"1x1p1", 2, 8, 4, 4, 16, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, true, false},
    {"7x7s2p3_stem", 2, 3, 16, 16, 8, {7, 7}, {2, 2}, {3, 3}, 1, 1, false, false, false},
    {"3x3_groups2_bias", 2, 8, 8, 8, 16, {3, 3}, {1, 1}, {1, 1}, 1, 2, true, true, false},
    {"3x3_dilation2", 2, 8, 12, 12, 8, {3, 3}, {1, 1}, {2, 2}, 2, 1, false, true, false},
    {"3x3_on_1x1_map", 4, 16, 1, 1, 16, {3, 3}, {1, 1}, {1, 1}, 1, 1, false, true, true},
    {"3x3s2p1_2x2_to_1x1", 4, 16, 2, 2, 24, {3, 3}, {2, 2}, {1, 1}, 1, 1, true, true, true},
    {"3x3s2p0_4x4_to_1x1", 3, 8, 4, 4, 8, {3, 3}, {2, 2}, {0, 0}, 1, 1, false, true, true},
    {"1x3p1_on_1x1_map", 2, 8, 1, 1, 8, {1, 3}, {1, 1}, {0, 1}, 1, 1, false, true, true},
    {"3x3_on_1x1_map_no_x_grad", 4, 16, 1, 1, 16, {3, 3}, {1, 1}, {1, 1}, 1, 1, false, false, true},
};

torch::nn::Conv2d make_conv(const ConvCase& c) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(c.c, c.o, torch::ExpandingArray<2>(c.k))
                               .stride(torch::ExpandingArray<2>(c.stride))
                               .padding(torch::ExpandingArray<2>(c.padding))
                               .dilation(c.dilation)
                               .groups(c.groups)
                               .bias(c.bias));
}

void set_layout(torch::nn::Conv2d& conv, torch::MemoryFormat fmt) {
  conv->weight.set_data(conv->weight.data().contiguous(fmt));
}

// max |a - b| / max |b|: the usual relative measure for sums in a different order.
struct Grads {
  torch::Tensor out, x, w, b;
};

// Output and gradients of `conv` (through `forward`) for x laid out as asked.
template <class F>
Grads run_conv(torch::nn::Conv2d& conv, const torch::Tensor& x0, const torch::Tensor& g,
               torch::MemoryFormat fmt, bool x_grad, F forward) {
  set_layout(conv, fmt);
  conv->zero_grad(true);
  auto x = x0.contiguous(fmt).detach().requires_grad_(x_grad);
  auto out = forward(*conv, x);
  out.backward(g);
  return {out.detach(), x_grad ? x.grad() : torch::Tensor(), conv->weight.grad(),
          conv->options.bias() ? conv->bias.grad() : torch::Tensor()};
}

class ConvDnnl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!conv2d_fast_path_built())
      GTEST_SKIP() << "built without oneDNN (GPULAB_WITH_DNNL=OFF, the default on the wheel): "
                      "conv2d_forward is libtorch's conv only";
    threads_ = at::get_num_threads();
  }
  void TearDown() override {
    if (threads_ > 0) at::set_num_threads(threads_);
  }
  int threads_ = 0;
};

TEST_F(ConvDnnl, MatchesLibtorchConvAtOneAndTwoThreads) {
  const auto cl = torch::MemoryFormat::ChannelsLast;
  const auto plain = [](torch::nn::Conv2dImpl& m, const torch::Tensor& x) { return m.forward(x); };
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const auto& c : kCases) {
      SCOPED_TRACE(std::string(c.name) + " threads=" + std::to_string(threads));
      torch::manual_seed(7);
      auto conv = make_conv(c);
      const auto x = torch::randn({c.n, c.c, c.h, c.w});
      const auto g = torch::randn(conv->forward(x).sizes()).contiguous(cl);
      const auto fast =
          run_conv(conv, x, g, cl, c.x_grad, [&c](torch::nn::Conv2dImpl& m, auto& xi) {
            EXPECT_TRUE(conv2d_fast_path_applies(m, xi));
            auto out = conv2d_forward(m, xi);
            const auto node = out.grad_fn()->name();
            EXPECT_EQ(node.find("ConvolutionBackward"), std::string::npos) << node;
            EXPECT_EQ(node.find("GemmConv2d") != std::string::npos, c.gemm) << node;
            return out;
          });
      ASSERT_TRUE(fast.w.defined());
      EXPECT_TRUE(fast.w.is_contiguous(cl));
      EXPECT_EQ(fast.w.strides(), conv->weight.strides());  // AccumulateGrad kept it as made
      for (auto fmt : {cl, torch::MemoryFormat::Contiguous}) {
        SCOPED_TRACE(fmt == cl ? "reference channels-last" : "reference contiguous");
        const auto ref = run_conv(conv, x, g, fmt, c.x_grad, plain);
        EXPECT_LE(gpulab::test::relative_diff(fast.out, ref.out), 1e-5);
        EXPECT_LE(gpulab::test::relative_diff(fast.w, ref.w), 1e-5);
        if (c.x_grad) {
          EXPECT_LE(gpulab::test::relative_diff(fast.x, ref.x), 1e-5);
        }
        if (c.bias) {
          EXPECT_LE(gpulab::test::relative_diff(fast.b, ref.b), 1e-5);
        }
        if (fmt == cl && !c.gemm) {
          // Forward and grad_input are libtorch's own kernels on the same layout: bit for bit.
          EXPECT_TRUE(torch::equal(fast.out, ref.out));
          if (c.x_grad) {
            EXPECT_TRUE(torch::equal(fast.x, ref.x));
          }
        }
      }
    }
  }
}

TEST_F(ConvDnnl, GradientsAccumulateOverTwoBackwards) {
  const auto cl = torch::MemoryFormat::ChannelsLast;
  for (size_t i : {1, 3, 10}) {  // the oneDNN weight gradient, then the sgemm path (two shapes)
    const auto& c = kCases[i];
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(c.bias);
    torch::manual_seed(3);
    auto conv = make_conv(c);
    set_layout(conv, cl);
    const auto x = torch::randn({c.n, c.c, c.h, c.w}).contiguous(cl);
    // The first gradient becomes .grad as made (no copy): it has the parameter's strides.
    const void* made = nullptr;
    conv->weight.register_hook([&](const torch::Tensor& g) { made = g.data_ptr(); });
    conv2d_forward(*conv, x).sum().backward();
    EXPECT_EQ(made, conv->weight.grad().data_ptr());
    const auto once_w = conv->weight.grad().clone();
    const auto once_b = conv->bias.grad().clone();
    conv2d_forward(*conv, x).sum().backward();
    EXPECT_LE(gpulab::test::relative_diff(conv->weight.grad(), 2 * once_w), 1e-6);
    EXPECT_LE(gpulab::test::relative_diff(conv->bias.grad(), 2 * once_b), 1e-6);
    EXPECT_TRUE(conv->weight.grad().is_contiguous(cl));
  }
}

TEST_F(ConvDnnl, OtherCasesKeepTheLibtorchPath) {
  const auto cl = torch::MemoryFormat::ChannelsLast;
  torch::manual_seed(5);
  auto conv = make_conv(kCases[0]);
  set_layout(conv, cl);
  const auto x = torch::randn({2, 16, 6, 6});
  const auto takes_plain = [&](const torch::Tensor& xi, const char* why) {
    SCOPED_TRACE(why);
    EXPECT_FALSE(conv2d_fast_path_applies(*conv, xi));
    auto out = conv2d_forward(*conv, xi);
    if (out.requires_grad()) {
      EXPECT_NE(out.grad_fn()->name().find("ConvolutionBackward"), std::string::npos);
    }
    EXPECT_TRUE(torch::equal(out, conv->forward(xi)));
  };
  takes_plain(x, "contiguous x");
  {
    torch::NoGradGuard no_grad;
    takes_plain(x.contiguous(cl), "no grad mode");
  }
  conv->weight.requires_grad_(false);
  takes_plain(x.contiguous(cl), "weight without grad");
  conv->weight.requires_grad_(true);
  set_conv_path(ConvPath::kLibtorch);
  takes_plain(x.contiguous(cl), "conv path libtorch");
  set_conv_path(ConvPath::kAuto);
  EXPECT_TRUE(conv2d_fast_path_applies(*conv, x.contiguous(cl)));
  {
    // ConvPath::kDnnl keeps the oneDNN weight gradient but not the sgemm path.
    auto one = make_conv(kCases[3]);
    set_layout(one, cl);
    const auto xi = torch::randn({3, 24, 5, 7}).contiguous(cl);
    set_conv_path(ConvPath::kDnnl);
    const auto dnnl_node = conv2d_forward(*one, xi).grad_fn()->name();
    set_conv_path(ConvPath::kAuto);
    EXPECT_NE(dnnl_node.find("DnnlConv2d"), std::string::npos) << dnnl_node;
    const auto gemm_node = conv2d_forward(*one, xi).grad_fn()->name();
    EXPECT_NE(gemm_node.find("GemmConv2d"), std::string::npos) << gemm_node;
  }
  conv->to(torch::kDouble);
  set_layout(conv, cl);
  takes_plain(x.to(torch::kDouble).contiguous(cl), "fp64");
  // 'same' padding is an option the fast path does not read: it falls back.
  auto same = torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 8, 3).padding(torch::kSame));
  set_layout(same, cl);
  EXPECT_FALSE(conv2d_fast_path_applies(*same, x.contiguous(cl)));
}

// A whole ResNet-18 and ResNet-50 in fp32 channels-last at 32 px (the last stage's maps are 1x1,
// so the sgemm path runs there), through the default paths and then through
// ConvPath::kLibtorch: every gradient agrees. Eval-mode BatchNorm keeps the comparison about
// the convolutions (train mode over 1x1 maps magnifies fp32 rounding, see model_zoo_test).
TEST_F(ConvDnnl, ResNetGradientsMatchTheLibtorchPath) {
  at::set_num_threads(2);
  for (const char* name : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(name);
    ModelOptions o;
    o.num_classes = 10;
    torch::manual_seed(11);
    auto model = create_model(name, o);
    make_channels_last(*model);
    model->eval();
    const auto x = torch::randn({2, 3, 32, 32}).contiguous(torch::MemoryFormat::ChannelsLast);
    const auto w = torch::randn({2, 10});
    const auto grads = [&] {
      model->zero_grad(true);
      (model->forward(x) * w).sum().backward();
      std::vector<torch::Tensor> g;
      for (const auto& p : model->parameters()) g.push_back(p.grad().clone());
      return g;
    };
    const auto fast = grads();
    set_conv_path(ConvPath::kLibtorch);
    const auto plain = grads();
    set_conv_path(ConvPath::kAuto);
    const auto params = model->parameters();
    ASSERT_EQ(fast.size(), plain.size());
    for (size_t i = 0; i < fast.size(); ++i) {
      SCOPED_TRACE("parameter " + std::to_string(i));
      EXPECT_LE(gpulab::test::relative_diff(fast[i], plain[i]), 1e-5);
      // The parameter's memory order: its strides wherever a size is above 1 (AccumulateGrad's
      // layout contract; a 1x1 weight's strides over its size-1 dims say nothing).
      for (int64_t d = 0; d < params[i].dim(); ++d) {
        if (params[i].size(d) > 1) {
          EXPECT_EQ(fast[i].stride(d), params[i].stride(d)) << "dim " << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpulab::train
