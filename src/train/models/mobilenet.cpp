// MobileNet V2 and V3 (small, large) with torchvision's layer indices in `features`, channel
// rounding, activations (ReLU6; ReLU/hardswish with hardsigmoid-gated SE) and init.
#include <string>
#include <vector>

#include "train/models/layers.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

// MobileNetV2's InvertedResidual: `conv` = [expand CNA] + depthwise CNA + 1x1 conv + BatchNorm.
class InvertedResidualV2Impl : public torch::nn::Module {
 public:
  InvertedResidualV2Impl(int64_t in, int64_t out, int64_t stride, int64_t expand) {
    use_residual_ = stride == 1 && in == out;
    int64_t hidden = in * expand;
    BnSettings bn;
    Seq conv;
    if (expand != 1) conv->push_back(conv_bn(in, hidden, 1, 1, 1, Act::kReLU6, bn));
    conv->push_back(conv_bn(hidden, hidden, 3, stride, hidden, Act::kReLU6, bn));
    conv->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, out, 1).bias(false)));
    conv->push_back(batch_norm(out));
    conv_ = register_module("conv", conv);
  }
  torch::Tensor forward(torch::Tensor x) {
    return use_residual_ ? x + conv_->forward(x) : conv_->forward(x);
  }

 private:
  Seq conv_{nullptr};
  bool use_residual_ = false;
};
TORCH_MODULE(InvertedResidualV2);

// One row of the MobileNetV3 paper's tables 1 and 2 (width multiplier 1).
struct V3Block {
  int64_t in;
  int64_t kernel;
  int64_t expanded;
  int64_t out;
  bool se;
  bool hardswish;
  int64_t stride;
};

// MobileNetV3's InvertedResidual: `block` = [expand CNA] + depthwise CNA + [SE] + project CNA.
class InvertedResidualV3Impl : public torch::nn::Module {
 public:
  InvertedResidualV3Impl(const V3Block& c, const BnSettings& bn) {
    use_residual_ = c.stride == 1 && c.in == c.out;
    Act act = c.hardswish ? Act::kHardswish : Act::kReLU;
    Seq block;
    if (c.expanded != c.in) block->push_back(conv_bn(c.in, c.expanded, 1, 1, 1, act, bn));
    block->push_back(conv_bn(c.expanded, c.expanded, c.kernel, c.stride, c.expanded, act, bn));
    if (c.se) {
      // torchvision's V3 SE: ReLU inside, hardsigmoid gate.
      block->push_back(SqueezeExcitation(c.expanded,
                                         make_divisible(static_cast<double>(c.expanded / 4)),
                                         Act::kReLU, Act::kHardsigmoid));
    }
    block->push_back(conv_bn(c.expanded, c.out, 1, 1, 1, Act::kNone, bn));
    block_ = register_module("block", block);
  }
  torch::Tensor forward(torch::Tensor x) {
    auto result = block_->forward(x);
    return use_residual_ ? result + x : result;
  }

 private:
  Seq block_{nullptr};
  bool use_residual_ = false;
};
TORCH_MODULE(InvertedResidualV3);

// Shared by V2 and V3: He (fan_out) convs, unit BatchNorm, N(0, 0.01) Linear, zero biases.
void init_mobilenet(torch::nn::Module& model) {
  init_weights(model, ConvInit::kKaimingFanOutRelu, LinearInit::kNormal001);
}

// Both versions: features, global average pooling, then the classifier head.
class PooledClassifier : public Classifier {
 public:
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::adaptive_avg_pool2d(features_->forward(x), {1, 1}).flatten(1);
    return classifier_->forward(x);
  }

 protected:
  // Registered in this order (torchvision's parameter names and order), then initialised.
  void set_parts(Seq features, Seq classifier) {
    features_ = register_module("features", features);
    classifier_ = register_module("classifier", classifier);
    init_mobilenet(*this);
  }

 private:
  Seq features_{nullptr};
  Seq classifier_{nullptr};
};

class MobileNetV2 : public PooledClassifier {
 public:
  explicit MobileNetV2(const ModelOptions& opts) {
    struct Row {
      int64_t expand, channels, repeats, stride;
    };
    static const Row kRows[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    const int64_t last_channel = 1280;
    Seq features;
    int64_t in = 32;
    features->push_back(conv_bn(3, in, 3, 2, 1, Act::kReLU6, BnSettings{}));
    for (const auto& r : kRows) {
      for (int64_t i = 0; i < r.repeats; ++i) {
        features->push_back(InvertedResidualV2(in, r.channels, i == 0 ? r.stride : 1, r.expand));
        in = r.channels;
      }
    }
    features->push_back(conv_bn(in, last_channel, 1, 1, 1, Act::kReLU6, BnSettings{}));
    double dropout = opts.dropout >= 0 ? opts.dropout : 0.2;
    set_parts(features,
              Seq(torch::nn::Dropout(dropout), torch::nn::Linear(last_channel, opts.num_classes)));
  }
};

class MobileNetV3 : public PooledClassifier {
 public:
  MobileNetV3(const std::vector<V3Block>& blocks, int64_t last_channel, const ModelOptions& opts) {
    // torchvision's V3 BatchNorm settings (from the TensorFlow reference).
    const BnSettings bn{1e-3, 0.01};
    Seq features;
    features->push_back(conv_bn(3, blocks.front().in, 3, 2, 1, Act::kHardswish, bn));
    for (const auto& b : blocks) features->push_back(InvertedResidualV3(b, bn));
    int64_t last_in = blocks.back().out;
    int64_t last_out = 6 * last_in;
    features->push_back(conv_bn(last_in, last_out, 1, 1, 1, Act::kHardswish, bn));
    double dropout = opts.dropout >= 0 ? opts.dropout : 0.2;
    set_parts(features,
              Seq(torch::nn::Linear(last_out, last_channel), Activation(Act::kHardswish),
                  torch::nn::Dropout(dropout), torch::nn::Linear(last_channel, opts.num_classes)));
  }
};

// Rows: in, kernel, expanded, out, SE, hardswish, stride.
const std::vector<V3Block> kV3Large = {
    {16, 3, 16, 16, false, false, 1},  {16, 3, 64, 24, false, false, 2},
    {24, 3, 72, 24, false, false, 1},  {24, 5, 72, 40, true, false, 2},
    {40, 5, 120, 40, true, false, 1},  {40, 5, 120, 40, true, false, 1},
    {40, 3, 240, 80, false, true, 2},  {80, 3, 200, 80, false, true, 1},
    {80, 3, 184, 80, false, true, 1},  {80, 3, 184, 80, false, true, 1},
    {80, 3, 480, 112, true, true, 1},  {112, 3, 672, 112, true, true, 1},
    {112, 5, 672, 160, true, true, 2}, {160, 5, 960, 160, true, true, 1},
    {160, 5, 960, 160, true, true, 1},
};
const std::vector<V3Block> kV3Small = {
    {16, 3, 16, 16, true, false, 2},  {16, 3, 72, 24, false, false, 2},
    {24, 3, 88, 24, false, false, 1}, {24, 5, 96, 40, true, true, 2},
    {40, 5, 240, 40, true, true, 1},  {40, 5, 240, 40, true, true, 1},
    {40, 5, 120, 48, true, true, 1},  {48, 5, 144, 48, true, true, 1},
    {48, 5, 288, 96, true, true, 2},  {96, 5, 576, 96, true, true, 1},
    {96, 5, 576, 96, true, true, 1},
};

ModelInfo mobilenet_info(const char* name, std::function<ClassifierPtr(const ModelOptions&)> make) {
  ModelInfo info;
  info.name = name;
  info.family = "mobilenet";
  info.default_image_size = 224;
  info.min_image_size = 32;
  info.make = std::move(make);
  return info;
}

}  // namespace

void add_mobilenet_models(std::vector<ModelInfo>& table) {
  table.push_back(mobilenet_info("mobilenet_v2", [](const ModelOptions& opts) -> ClassifierPtr {
    return std::make_shared<MobileNetV2>(opts);
  }));
  table.push_back(
      mobilenet_info("mobilenet_v3_large", [](const ModelOptions& opts) -> ClassifierPtr {
        return std::make_shared<MobileNetV3>(kV3Large, 1280, opts);
      }));
  table.push_back(
      mobilenet_info("mobilenet_v3_small", [](const ModelOptions& opts) -> ClassifierPtr {
        return std::make_shared<MobileNetV3>(kV3Small, 1024, opts);
      }));
}

}  // namespace gpulab::train
