// DenseNet family (torchvision.models.densenet): densenet121/161/169/201 (DenseNet-BC), with
// torchvision's names (features.denseblockN.denselayerM.norm1, ..., features.transitionN.conv).
#include "train/models/layers.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

// BN-ReLU-1x1 conv (bottleneck to bn_size * growth) then BN-ReLU-3x3 conv (growth channels).
class DenseLayerImpl : public torch::nn::Module {
 public:
  DenseLayerImpl(int64_t in, int64_t growth, int64_t bn_size, double drop_rate)
      : drop_rate_(drop_rate) {
    norm1_ = register_module("norm1", batch_norm(in));
    conv1_ = register_module("conv1", conv2d(in, bn_size * growth, 1));
    norm2_ = register_module("norm2", batch_norm(bn_size * growth));
    conv2_ = register_module("conv2", conv2d(bn_size * growth, growth, 3, 1, 1));
  }

  torch::Tensor forward(const torch::Tensor& features) {
    auto out = conv1_->forward(torch::relu(norm1_->forward(features)));
    out = conv2_->forward(torch::relu(norm2_->forward(out)));
    if (drop_rate_ > 0) out = torch::dropout(out, drop_rate_, is_training());
    return out;
  }

 private:
  double drop_rate_;
  BatchNorm2d norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
};
TORCH_MODULE(DenseLayer);

// Each layer sees the concatenation of the block input and every earlier layer's output.
class DenseBlockImpl : public torch::nn::Module {
 public:
  DenseBlockImpl(int64_t layers, int64_t in, int64_t growth, int64_t bn_size, double drop_rate) {
    for (int64_t i = 0; i < layers; ++i) {
      layers_.push_back(register_module("denselayer" + std::to_string(i + 1),
                                        DenseLayer(in + i * growth, growth, bn_size, drop_rate)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    std::vector<torch::Tensor> features{x};
    for (auto& layer : layers_) features.push_back(layer->forward(torch::cat(features, 1)));
    return torch::cat(features, 1);
  }

 private:
  std::vector<DenseLayer> layers_;
};
TORCH_MODULE(DenseBlock);

struct DenseNetSpec {
  int64_t growth;
  std::array<int64_t, 4> blocks;
  int64_t init_features;
};

class DenseNet : public Classifier {
 public:
  DenseNet(const DenseNetSpec& spec, int64_t num_classes, double drop_rate) {
    constexpr int64_t kBnSize = 4;
    torch::nn::Sequential f;
    f->push_back("conv0", conv2d(3, spec.init_features, 7, 2, 3));
    f->push_back("norm0", batch_norm(spec.init_features));
    f->push_back("relu0", torch::nn::ReLU());
    f->push_back("pool0",
                 torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
    int64_t channels = spec.init_features;
    for (size_t i = 0; i < spec.blocks.size(); ++i) {
      const std::string n = std::to_string(i + 1);
      f->push_back("denseblock" + n,
                   DenseBlock(spec.blocks[i], channels, spec.growth, kBnSize, drop_rate));
      channels += spec.blocks[i] * spec.growth;
      if (i + 1 == spec.blocks.size()) break;
      Seq t;
      t->push_back("norm", batch_norm(channels));
      t->push_back("relu", torch::nn::ReLU());
      t->push_back("conv", conv2d(channels, channels / 2, 1));
      t->push_back("pool", torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(2).stride(2)));
      f->push_back("transition" + n, t);
      channels /= 2;
    }
    f->push_back("norm5", batch_norm(channels));
    features_ = register_module("features", f);
    classifier_ = register_module("classifier", torch::nn::Linear(channels, num_classes));
    // torchvision: Kaiming normal (fan_in) convs, BN 1/0, Linear bias 0.
    init_weights(*this, ConvInit::kKaimingFanInRelu, LinearInit::kZeroBias);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(features_->forward(x));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return classifier_->forward(x);
  }

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Linear classifier_{nullptr};
};

void add_densenet(std::vector<ModelInfo>& table, const char* name, DenseNetSpec spec) {
  ModelInfo info;
  info.name = name;
  info.family = "densenet";
  info.default_image_size = 224;
  info.min_image_size = 32;  // stem /4, then three transitions halve it again
  info.make = [spec](const ModelOptions& o) -> ClassifierPtr {
    return std::make_shared<DenseNet>(spec, o.num_classes, o.dropout < 0 ? 0.0 : o.dropout);
  };
  table.push_back(std::move(info));
}

}  // namespace

void add_densenet_models(std::vector<ModelInfo>& table) {
  add_densenet(table, "densenet121", {32, {6, 12, 24, 16}, 64});
  add_densenet(table, "densenet161", {48, {6, 12, 36, 24}, 96});
  add_densenet(table, "densenet169", {32, {6, 12, 32, 32}, 64});
  add_densenet(table, "densenet201", {32, {6, 12, 48, 32}, 64});
}

}  // namespace gpulab::train
