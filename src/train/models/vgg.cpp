// VGG family (torchvision.models.vgg): vgg11/13/16/19 and their _bn variants. The indices of
// `features` and `classifier` count ReLU, pooling and dropout too, exactly as torchvision's.
#include "train/models/layers.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

constexpr int64_t kPool = 0;  // 'M' in torchvision's configuration lists

const std::vector<int64_t>& config(char letter) {
  static const std::vector<int64_t> a = {64,  kPool, 128,   kPool, 256, 256,  kPool,
                                         512, 512,   kPool, 512,   512, kPool};
  static const std::vector<int64_t> b = {64,    64,  kPool, 128,   128, kPool, 256,  256,
                                         kPool, 512, 512,   kPool, 512, 512,   kPool};
  static const std::vector<int64_t> d = {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
                                         kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
  static const std::vector<int64_t> e = {64,  64,    kPool, 128,   128, kPool, 256,
                                         256, 256,   256,   kPool, 512, 512,   512,
                                         512, kPool, 512,   512,   512, 512,   kPool};
  switch (letter) {
    case 'A':
      return a;
    case 'B':
      return b;
    case 'D':
      return d;
    default:
      return e;
  }
}

class Vgg : public Classifier {
 public:
  Vgg(char cfg, bool batch_norm_layers, int64_t num_classes, double dropout) {
    torch::nn::Sequential features;
    int64_t in = 3;
    for (int64_t v : config(cfg)) {
      if (v == kPool) {
        features->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)));
        continue;
      }
      features->push_back(conv2d(in, v, 3, 1, 1, 1, /*bias=*/true));
      if (batch_norm_layers) features->push_back(batch_norm(v));
      features->push_back(torch::nn::ReLU());
      in = v;
    }
    features_ = register_module("features", features);
    classifier_ = register_module(
        "classifier",
        torch::nn::Sequential(torch::nn::Linear(512 * 7 * 7, 4096), torch::nn::ReLU(),
                              torch::nn::Dropout(dropout), torch::nn::Linear(4096, 4096),
                              torch::nn::ReLU(), torch::nn::Dropout(dropout),
                              torch::nn::Linear(4096, num_classes)));
    // torchvision: Kaiming normal (fan_out) convs, BN 1/0, Linear N(0, 0.01), zero biases.
    init_weights(*this, ConvInit::kKaimingFanOutRelu, LinearInit::kNormal001);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = features_->forward(x);
    x = torch::adaptive_avg_pool2d(x, {7, 7}).flatten(1);
    return classifier_->forward(x);
  }

 private:
  torch::nn::Sequential features_{nullptr}, classifier_{nullptr};
};

void add_vgg(std::vector<ModelInfo>& table, std::string name, char cfg, bool bn) {
  ModelInfo info;
  info.name = std::move(name);
  info.family = "vgg";
  info.default_image_size = 224;
  info.min_image_size = 32;  // five 2x2 max pools
  info.make = [cfg, bn](const ModelOptions& o) -> ClassifierPtr {
    return std::make_shared<Vgg>(cfg, bn, o.num_classes, o.dropout < 0 ? 0.5 : o.dropout);
  };
  table.push_back(std::move(info));
}

}  // namespace

void add_vgg_models(std::vector<ModelInfo>& table) {
  const std::pair<const char*, char> variants[] = {
      {"vgg11", 'A'}, {"vgg13", 'B'}, {"vgg16", 'D'}, {"vgg19", 'E'}};
  for (const auto& [name, cfg] : variants) add_vgg(table, name, cfg, false);
  for (const auto& [name, cfg] : variants) add_vgg(table, std::string(name) + "_bn", cfg, true);
}

}  // namespace gpulab::train
