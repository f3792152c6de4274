// ConvNeXt tiny/small/base with torchvision's names (features.N.M.block.0, layer_scale,
// LayerNorm2d), stochastic depth schedule and truncated-normal init.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "train/models/layers.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

// torchvision's Permute module: no parameters, only holds an index in a Sequential.
torch::nn::Functional permute(std::vector<int64_t> dims) {
  return torch::nn::Functional([dims](torch::Tensor x) { return x.permute(dims); });
}

// LayerNorm over the channels of an NCHW tensor, eps 1e-6: torchvision's LayerNorm2d, which is
// an nn.LayerNorm too (same parameters and options).
class LayerNorm2dImpl : public torch::nn::LayerNormImpl {
 public:
  explicit LayerNorm2dImpl(int64_t channels)
      : LayerNormImpl(torch::nn::LayerNormOptions({channels}).eps(1e-6)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return LayerNormImpl::forward(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
  }
};
TORCH_MODULE(LayerNorm2d);

// ConvNeXt block: depthwise 7x7, LayerNorm and an inverted MLP in channels-last, scaled per
// channel by layer_scale, with stochastic depth on the residual branch.
class CNBlockImpl : public torch::nn::Module {
 public:
  CNBlockImpl(int64_t dim, double layer_scale, double sd_prob) {
    layer_scale_ = register_parameter("layer_scale", torch::ones({dim, 1, 1}) * layer_scale);
    block_ = register_module(
        "block",
        Seq(torch::nn::Conv2d(torch::nn::Conv2dOptions(dim, dim, 7).padding(3).groups(dim)),
            permute({0, 2, 3, 1}),
            torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6)),
            torch::nn::Linear(dim, 4 * dim), torch::nn::GELU(), torch::nn::Linear(4 * dim, dim),
            permute({0, 3, 1, 2})));
    stochastic_depth_ = register_module("stochastic_depth", StochasticDepth(sd_prob));
  }
  torch::Tensor forward(torch::Tensor input) {
    return stochastic_depth_->forward(layer_scale_ * block_->forward(input)) + input;
  }

 private:
  torch::Tensor layer_scale_;
  Seq block_{nullptr};
  StochasticDepth stochastic_depth_{nullptr};
};
TORCH_MODULE(CNBlock);

struct StageConfig {
  int64_t channels;
  std::optional<int64_t> out_channels;  // the downsampling layer after the stage, if any
  int64_t num_layers;
};

struct Variant {
  const char* name;
  std::vector<StageConfig> stages;
  double stochastic_depth;
};

class ConvNeXt : public Classifier {
 public:
  ConvNeXt(const Variant& v, const ModelOptions& opts) {
    const double sd = opts.stochastic_depth >= 0 ? opts.stochastic_depth : v.stochastic_depth;
    const double layer_scale = 1e-6;
    Seq features;
    const int64_t stem = v.stages.front().channels;
    features->push_back(
        Seq(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, stem, 4).stride(4)), LayerNorm2d(stem)));
    int64_t total = 0;
    for (const auto& s : v.stages) total += s.num_layers;
    int64_t block_id = 0;
    for (const auto& s : v.stages) {
      Seq stage;
      for (int64_t i = 0; i < s.num_layers; ++i) {
        // Linear in depth, from 0 at the first block to sd at the last (torchvision's schedule).
        const double p = sd * static_cast<double>(block_id) / (static_cast<double>(total) - 1.0);
        stage->push_back(CNBlock(s.channels, layer_scale, p));
        ++block_id;
      }
      features->push_back(stage);
      if (s.out_channels) {
        features->push_back(Seq(
            LayerNorm2d(s.channels),
            torch::nn::Conv2d(torch::nn::Conv2dOptions(s.channels, *s.out_channels, 2).stride(2))));
      }
    }
    features_ = register_module("features", features);
    const auto& last = v.stages.back();
    const int64_t last_channels = last.out_channels.value_or(last.channels);
    classifier_ =
        register_module("classifier", Seq(LayerNorm2d(last_channels), torch::nn::Flatten(),
                                          torch::nn::Linear(last_channels, opts.num_classes)));
    init_weights();
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::adaptive_avg_pool2d(features_->forward(x), {1, 1});
    return classifier_->forward(x);
  }

 private:
  // torchvision: truncated normal (std 0.02) for every conv and linear weight, zero biases.
  void init_weights() {
    torch::NoGradGuard no_grad;
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<torch::nn::Conv2d>()) {
        trunc_normal(conv->weight, 0.02);
        conv->bias.zero_();
      } else if (auto* linear = m->as<torch::nn::Linear>()) {
        trunc_normal(linear->weight, 0.02);
        linear->bias.zero_();
      }
    }
  }

  Seq features_{nullptr};
  Seq classifier_{nullptr};
};

}  // namespace

void add_convnext_models(std::vector<ModelInfo>& table) {
  static const Variant kVariants[] = {
      {"convnext_tiny", {{96, 192, 3}, {192, 384, 3}, {384, 768, 9}, {768, std::nullopt, 3}}, 0.1},
      {"convnext_small",
       {{96, 192, 3}, {192, 384, 3}, {384, 768, 27}, {768, std::nullopt, 3}},
       0.4},
      {"convnext_base",
       {{128, 256, 3}, {256, 512, 3}, {512, 1024, 27}, {1024, std::nullopt, 3}},
       0.5},
  };
  for (const auto& v : kVariants) {
    ModelInfo info;
    info.name = v.name;
    info.family = "convnext";
    info.default_image_size = 224;
    info.min_image_size = 32;  // four downsamplings by 4, 2, 2, 2
    info.make = [&v](const ModelOptions& opts) -> ClassifierPtr {
      return std::make_shared<ConvNeXt>(v, opts);
    };
    table.push_back(std::move(info));
  }
}

}  // namespace gpulab::train
