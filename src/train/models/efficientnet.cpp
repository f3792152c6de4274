// EfficientNet B0..B7 with torchvision's layer names, channel rounding, stochastic depth schedule
// and init, so that weights move between gpulab and torchvision without a mapping table.
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/models/layers.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

// One row of the EfficientNet paper's Table 1, already scaled by the variant's multipliers.
struct MbConvStage {
  int64_t expand_ratio;
  int64_t kernel;
  int64_t stride;
  int64_t in_channels;
  int64_t out_channels;
  int64_t num_layers;
};

// Mobile inverted bottleneck: expand 1x1, depthwise kxk, squeeze-excitation, project 1x1, and
// stochastic depth on the residual branch.
class MBConvImpl : public torch::nn::Module {
 public:
  MBConvImpl(const MbConvStage& c, double sd_prob, const BnSettings& bn) {
    use_residual_ = c.stride == 1 && c.in_channels == c.out_channels;
    int64_t expanded = make_divisible(static_cast<double>(c.in_channels * c.expand_ratio));
    Seq block;
    if (expanded != c.in_channels) {
      block->push_back(conv_bn(c.in_channels, expanded, 1, 1, 1, Act::kSiLU, bn));
    }
    block->push_back(conv_bn(expanded, expanded, c.kernel, c.stride, expanded, Act::kSiLU, bn));
    block->push_back(
        SqueezeExcitation(expanded, std::max<int64_t>(1, c.in_channels / 4), Act::kSiLU));
    block->push_back(conv_bn(expanded, c.out_channels, 1, 1, 1, Act::kNone, bn));
    block_ = register_module("block", block);
    stochastic_depth_ = register_module("stochastic_depth", StochasticDepth(sd_prob));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto result = block_->forward(x);
    return use_residual_ ? stochastic_depth_->forward(result) + x : result;
  }

 private:
  Seq block_{nullptr};
  StochasticDepth stochastic_depth_{nullptr};
  bool use_residual_ = false;
};
TORCH_MODULE(MBConv);

struct EfficientNetVariant {
  const char* name;
  double width_mult;
  double depth_mult;
  double dropout;
  int64_t image_size;
  BnSettings bn;
};

class EfficientNet : public Classifier {
 public:
  EfficientNet(const EfficientNetVariant& v, const ModelOptions& opts) {
    auto ch = [&](int64_t c) { return make_divisible(static_cast<double>(c) * v.width_mult); };
    auto depth = [&](int64_t n) {
      return static_cast<int64_t>(std::ceil(static_cast<double>(n) * v.depth_mult));
    };
    const std::vector<MbConvStage> stages = {
        {1, 3, 1, ch(32), ch(16), depth(1)},   {6, 3, 2, ch(16), ch(24), depth(2)},
        {6, 5, 2, ch(24), ch(40), depth(2)},   {6, 3, 2, ch(40), ch(80), depth(3)},
        {6, 5, 1, ch(80), ch(112), depth(3)},  {6, 5, 2, ch(112), ch(192), depth(4)},
        {6, 3, 1, ch(192), ch(320), depth(1)},
    };
    double sd_prob = opts.stochastic_depth >= 0 ? opts.stochastic_depth : 0.2;
    double dropout = opts.dropout >= 0 ? opts.dropout : v.dropout;

    Seq features;
    features->push_back(conv_bn(3, stages[0].in_channels, 3, 2, 1, Act::kSiLU, v.bn));
    int64_t total_blocks = 0;
    for (const auto& s : stages) total_blocks += s.num_layers;
    int64_t block_id = 0;
    for (const auto& s : stages) {
      Seq stage;
      for (int64_t i = 0; i < s.num_layers; ++i) {
        MbConvStage c = s;
        if (i > 0) {
          c.in_channels = c.out_channels;
          c.stride = 1;
        }
        // The drop probability grows linearly with the block's depth in the whole network.
        double p = sd_prob * static_cast<double>(block_id) / static_cast<double>(total_blocks);
        stage->push_back(MBConv(c, p, v.bn));
        ++block_id;
      }
      features->push_back(stage);
    }
    int64_t last_in = stages.back().out_channels;
    int64_t last_out = 4 * last_in;
    features->push_back(conv_bn(last_in, last_out, 1, 1, 1, Act::kSiLU, v.bn));
    features_ = register_module("features", features);

    classifier_ = register_module("classifier", Seq(torch::nn::Dropout(dropout),
                                                    torch::nn::Linear(last_out, opts.num_classes)));
    init_weights();
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = features_->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return classifier_->forward(x);
  }

 private:
  // torchvision's init: He (fan_out) for convs, unit BatchNorm, uniform(+-1/sqrt(out)) for Linear.
  void init_weights() {
    train::init_weights(*this, ConvInit::kKaimingFanOutRelu, LinearInit::kUniformFanOut);
  }

  Seq features_{nullptr};
  Seq classifier_{nullptr};
};

}  // namespace

void add_efficientnet_models(std::vector<ModelInfo>& table) {
  // B5..B7 use BatchNorm eps 1e-3 and momentum 0.01, as in torchvision (weights ported from TF).
  static const EfficientNetVariant kVariants[] = {
      {"efficientnet_b0", 1.0, 1.0, 0.2, 224, {}},
      {"efficientnet_b1", 1.0, 1.1, 0.2, 240, {}},
      {"efficientnet_b2", 1.1, 1.2, 0.3, 260, {}},
      {"efficientnet_b3", 1.2, 1.4, 0.3, 300, {}},
      {"efficientnet_b4", 1.4, 1.8, 0.4, 380, {}},
      {"efficientnet_b5", 1.6, 2.2, 0.4, 456, {1e-3, 0.01}},
      {"efficientnet_b6", 1.8, 2.6, 0.5, 528, {1e-3, 0.01}},
      {"efficientnet_b7", 2.0, 3.1, 0.5, 600, {1e-3, 0.01}},
  };
  for (const auto& v : kVariants) {
    ModelInfo info;
    info.name = v.name;
    info.family = "efficientnet";
    info.default_image_size = v.image_size;
    info.min_image_size = 32;
    info.make = [&v](const ModelOptions& opts) -> ClassifierPtr {
      return std::make_shared<EfficientNet>(v, opts);
    };
    table.push_back(std::move(info));
  }
}

}  // namespace gpulab::train
